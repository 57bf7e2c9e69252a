// Kernels of the stream-ordered mamba state calls (lib/mamba/mamba_device.hpp).
// One thread per word of a (slot, layer) state, conv words first, so that a
// warp reads and writes consecutive words.
#include <cuda_runtime.h>

#include <string>

#include "device_fault.cuh"
#include "mamba/mamba_device.hpp"
#include "util/fault_injection.hpp"

namespace kvp::mamba::dev {
namespace {

constexpr int kThreads = 256;

struct InlineSlots {
  int32_t src[kInlineSlots];
  int32_t dst[kInlineSlots];
  int n;
};

Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

unsigned blocks_for(uint64_t units) {
  const uint64_t b = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b == 0 ? 1 : (b < 65535ull * 16 ? b : 65535ull * 16));
}

// Word w of the state of (layer, slot): conv words, then ssm words.
template <class Word>
__device__ __forceinline__ Word* word_at(const States& s, uint32_t layer, int64_t slot, uint64_t w,
                                         uint64_t conv_words) {
  if (w < conv_words) return reinterpret_cast<Word*>(s.conv + (layer * s.rows + uint64_t(slot)) * s.conv_bytes) + w;
  return reinterpret_cast<Word*>(s.ssm + (layer * s.rows + uint64_t(slot)) * s.ssm_bytes) + (w - conv_words);
}

// Pair p (of n), its layer and word, from a flat thread index.
struct Unit {
  uint64_t pair, word;
  uint32_t layer;
};
__device__ __forceinline__ Unit unit_of(uint64_t t, uint64_t per_state, uint32_t layers) {
  const uint64_t state = t / per_state;
  return Unit{state / layers, t - state * per_state, static_cast<uint32_t>(state % layers)};
}

template <class Word>
__global__ void zero_kernel(States s, InlineSlots in, uint64_t conv_words, uint64_t words) {
  const uint64_t total = uint64_t(in.n) * s.layers * words;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const Unit u = unit_of(t, words, s.layers);
    *word_at<Word>(s, u.layer, in.dst[u.pair], u.word, conv_words) = Word{};
  }
}

template <class Word>
__global__ void copy_inline_kernel(States s, InlineSlots in, uint64_t conv_words, uint64_t words) {
  const uint64_t total = uint64_t(in.n) * s.layers * words;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const Unit u = unit_of(t, words, s.layers);
    *word_at<Word>(s, u.layer, in.dst[u.pair], u.word, conv_words) =
        *word_at<Word>(s, u.layer, in.src[u.pair], u.word, conv_words);
  }
}

template <class Word>
__global__ void copy_kernel(States s, const int32_t* src, const int32_t* dst, uint64_t n, uint64_t conv_words,
                            uint64_t words, pool::dev::FaultSink f) {
  auto* rec = static_cast<backend::FaultRecord*>(f.record);
  if (kvp_faulted(rec)) return;  // no barriers: threads may leave on their own
  const uint64_t total = n * s.layers * words;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const Unit u = unit_of(t, words, s.layers);
    const int32_t from = src[u.pair], to = dst[u.pair];
    if (from < 1 || uint64_t(from) >= s.rows || to < 1 || uint64_t(to) >= s.rows) {
      if (u.layer == 0 && u.word == 0) {
        const int32_t bad = from < 1 || uint64_t(from) >= s.rows ? from : to;
        kvp_raise(rec, f.host_flag, backend::kFaultOutOfRange, f.op, static_cast<int64_t>(u.pair), bad,
                  static_cast<int64_t>(s.rows));
      }
      continue;
    }
    *word_at<Word>(s, u.layer, to, u.word, conv_words) = *word_at<Word>(s, u.layer, from, u.word, conv_words);
  }
}

// The widest word (4, 2 or 1 bytes) that divides both state sizes and both bases.
int word_size(const States& s) {
  const uint64_t bits = 4 | s.conv_bytes | s.ssm_bytes | reinterpret_cast<uintptr_t>(s.conv) |
                        reinterpret_cast<uintptr_t>(s.ssm);
  return static_cast<int>(bits & (~bits + 1));
}

template <template <class> class Launch, class... Args>
Status dispatch(const States& s, Args&&... args) {
  switch (word_size(s)) {
    case 4: return Launch<uint32_t>::run(s, args...);
    case 2: return Launch<uint16_t>::run(s, args...);
    default: return Launch<uint8_t>::run(s, args...);
  }
}

template <class Word>
struct ZeroLaunch {
  static Status run(const States& s, const InlineSlots& in, cudaStream_t stream) {
    const uint64_t conv_words = s.conv_bytes / sizeof(Word), words = conv_words + s.ssm_bytes / sizeof(Word);
    KVP_INJECTION_POINT("zero_kernel launch");
    zero_kernel<Word><<<blocks_for(uint64_t(in.n) * s.layers * words), kThreads, 0, stream>>>(s, in, conv_words, words);
    return launch_status("mamba zero kernel");
  }
};

template <class Word>
struct CopyInlineLaunch {
  static Status run(const States& s, const InlineSlots& in, cudaStream_t stream) {
    const uint64_t conv_words = s.conv_bytes / sizeof(Word), words = conv_words + s.ssm_bytes / sizeof(Word);
    KVP_INJECTION_POINT("copy_inline_kernel launch");
    copy_inline_kernel<Word><<<blocks_for(uint64_t(in.n) * s.layers * words), kThreads, 0, stream>>>(s, in, conv_words,
                                                                                                  words);
    return launch_status("mamba copy kernel");
  }
};

template <class Word>
struct CopyLaunch {
  static Status run(const States& s, const int32_t* src, const int32_t* dst, size_t n, cudaStream_t stream,
                    const pool::dev::FaultSink& f) {
    const uint64_t conv_words = s.conv_bytes / sizeof(Word), words = conv_words + s.ssm_bytes / sizeof(Word);
    KVP_INJECTION_POINT("copy_kernel launch");
    copy_kernel<Word><<<blocks_for(uint64_t(n) * s.layers * words), kThreads, 0, stream>>>(s, src, dst, n, conv_words,
                                                                                        words, f);
    return launch_status("mamba copy kernel");
  }
};

}  // namespace

Status zero_slots(const States& s, const int32_t* slots, size_t n, void* stream) {
  for (size_t first = 0; first < n; first += kInlineSlots) {
    InlineSlots in{};
    in.n = static_cast<int>(n - first < kInlineSlots ? n - first : kInlineSlots);
    for (int i = 0; i < in.n; ++i) in.dst[i] = slots[first + static_cast<size_t>(i)];
    KVPOOL_RETURN_IF_ERROR(dispatch<ZeroLaunch>(s, in, static_cast<cudaStream_t>(stream)));
  }
  return Status::ok();
}

Status copy_slot(const States& s, int32_t src, int32_t dst, void* stream) {
  InlineSlots in{};
  in.n = 1;
  in.src[0] = src;
  in.dst[0] = dst;
  return dispatch<CopyInlineLaunch>(s, in, static_cast<cudaStream_t>(stream));
}

Status copy_slots(const States& s, const int32_t* src, const int32_t* dst, size_t n, void* stream,
                  const pool::dev::FaultSink& fault) {
  if (n == 0) return Status::ok();
  return dispatch<CopyLaunch>(s, src, dst, n, static_cast<cudaStream_t>(stream), fault);
}

}  // namespace kvp::mamba::dev
