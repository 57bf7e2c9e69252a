#!/usr/bin/env bash
# csharp.package: a C# program outside the repository references
# bindings/csharp/KvPool.csproj (ProjectReference) the way
# docs/services.md#packages says, is built with mono's xbuild against this
# build tree, and runs from its own output folder, which must hold
# KvPool.dll and libkvpool_csharp.so.
#
#   package_check.sh BUILD_DIR WORK_DIR XBUILD MONO
set -euo pipefail

build=$1 work=$2 xbuild=$3 mono=$4
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

check_name=package_check
# fail, expect_smoke, write_csharp_smoke, smoke_config, smoke_want
# shellcheck source=../smoke_check.sh
source "$repo/bindings/smoke_check.sh"

# The project's version is the library's (include/kvpool/version.h).
version=$(sed -n 's/^#define KVPOOL_VERSION_STRING "\(.*\)"/\1/p' "$repo/include/kvpool/version.h")
grep -q "<Version>$version</Version>" "$repo/bindings/csharp/KvPool.csproj" ||
  fail "KvPool.csproj's <Version> is not the library's version, $version"

rm -rf "$work"
mkdir -p "$work/smoke"
cat >"$work/smoke/Smoke.csproj" <<EOF
<?xml version="1.0" encoding="utf-8"?>
<Project ToolsVersion="4.0" DefaultTargets="Build" xmlns="http://schemas.microsoft.com/developer/msbuild/2003">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <AssemblyName>Smoke</AssemblyName>
    <TargetFrameworkVersion>v4.5</TargetFrameworkVersion>
    <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
    <OutputPath>bin/</OutputPath>
  </PropertyGroup>
  <ItemGroup>
    <Compile Include="Smoke.cs" />
    <Reference Include="System" />
    <ProjectReference Include="$repo/bindings/csharp/KvPool.csproj" />
  </ItemGroup>
  <Import Project="\$(MSBuildToolsPath)/Microsoft.CSharp.targets" />
</Project>
EOF
write_csharp_smoke "$work/smoke/Smoke.cs"
# KvPoolBuild reaches KvPool.csproj too (a global property); its own outputs
# go into <build>/bindings/csharp/msbuild.
(cd "$work/smoke" && "$xbuild" /nologo /verbosity:minimal /p:KvPoolBuild="$build" Smoke.csproj) \
  >"$work/xbuild.log" 2>&1 ||
  { cat "$work/xbuild.log"; fail "xbuild"; }
bin=$work/smoke/bin
for f in Smoke.exe KvPool.dll libkvpool_csharp.so; do
  [[ -f $bin/$f ]] || { cat "$work/xbuild.log"; fail "no $f in the program's output folder"; }
done

unset LD_LIBRARY_PATH MONO_PATH
out=$(cd "$work" && "$mono" --debug "$bin/Smoke.exe" "$smoke_config")
echo "csharp: $out"
expect_smoke mono "$out"
echo "package_check: OK"
