# A mangled internal (kvp::) C++ symbol that is compiled into libkvpool but must
# never be exported. tests/abi checks that it really exists in the library's
# static symbol table, so c.dlopen's "dlsym must not find it" stays meaningful.
# If the function is renamed, abi.exports says so: pick another kvp:: function
# (nm -C lib/CMakeFiles/kvpool.dir/**/*.o | grep ' T kvp::') and update this.
set(KVPOOL_INTERNAL_CANARY "_ZN3kvp6config12parse_configEPKcmPNS0_6ConfigE")
