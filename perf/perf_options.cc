#include "perf/perf_options.h"

#include <getopt.h>

#include <cstdio>
#include <cstring>

#include "core/compression.h"
#include "core/datatype.h"
#include "perf/first_size_warmup.h"
#include "core/command_line_numbers.h"

namespace fairway::perf {

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-n iters] [-w warmup]\n"
               "          [-c check 0|1] [-d type|all] [-o op|all] [-r root] [-a 0|1|2|3] [-z 0|1] [-J file.json] [-m host|mappable|cuda]\n"
               "  types: int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double float8e4m3 float8e5m2;\n"
               "  ops: sum prod max min avg\n"
               "  -w: warm-up iterations before each size; the first size also warms up for at least %d ms\n"
               "  -a: time reported is rank 0's (0), the mean (1, default), min (2) or max (3) over ranks\n"
               "  -z: blocking calls (host buffers: every call is blocking, so both values time the same)\n"
               "  -J: write the rows and the summary as JSON to file.json (rank 0)\n"
               "  -m: buffers in host memory (default), in host memory from fwHostMemAlloc, which the node's\n"
               "     other ranks map (mappable), or on this rank's GPU (local rank mod GPUs)\n"
               "  -q none|fp16|bf16|int8|int4 [-B blocksize]: the compressed collective (allreduce, reduce-scatter;\n"
               "     allgather: fp16, bf16) on float, half or bfloat16 data; busbw counts the uncompressed size and\n"
               "     the #wrong columns show the relative L2 error against the full-precision result instead\n",
               argv0, kFirstSizeWarmupMs);
}

bool parseOptions(int argc, char** argv, bool usesOp, Options* o) {
  int c;
  while ((c = getopt(argc, argv, "b:e:f:i:n:w:c:d:o:r:a:z:J:m:q:B:h")) != -1) {
    bool ok = true;
    switch (c) {
      case 'b': ok = parseSize(optarg, &o->minBytes); break;
      case 'e': ok = parseSize(optarg, &o->maxBytes); break;
      case 'f': ok = parseFactor(optarg, &o->stepFactor) && o->stepFactor > 1.0; break;
      case 'i': ok = parseSize(optarg, &o->stepBytes) && o->stepBytes > 0; o->stepFactor = 0; break;
      case 'n': ok = parseInt(optarg, &o->iters) && o->iters > 0; break;
      case 'w': ok = parseInt(optarg, &o->warmup); break;
      case 'c': ok = parseInt(optarg, &o->check); break;
      case 'r': ok = parseInt(optarg, &o->root); break;
      case 'a': ok = parseInt(optarg, &o->average) && o->average <= 3; break;
      case 'z': {  // host calls always return complete, so 0 and 1 time the same: validated only
        int blocking = 0;
        ok = parseInt(optarg, &blocking) && blocking <= 1;
        break;
      }
      case 'J': o->jsonPath = optarg; ok = !o->jsonPath.empty(); break;
      case 'm':
        ok = !std::strcmp(optarg, "host") || !std::strcmp(optarg, "mappable") || !std::strcmp(optarg, "cuda");
        o->memory = !std::strcmp(optarg, "cuda")       ? Memory::Cuda
                    : !std::strcmp(optarg, "mappable") ? Memory::Mappable
                                                       : Memory::Host;
        break;
      case 'q': {
        ok = false;
        for (int i = 0; i < fwNumCompressions; ++i) {
          if (std::strcmp(optarg, compressionName(static_cast<fwCompressKind_t>(i))) == 0) {
            o->compression.kind = static_cast<fwCompressKind_t>(i);
            ok = true;
          }
        }
        break;
      }
      case 'B': ok = parseInt(optarg, &o->compression.blockSize) && o->compression.blockSize > 0; break;
      case 'd': {
        o->types.clear();
        for (int i = 0; i < fwNumTypes; ++i) {
          const auto type = static_cast<fwDataType_t>(i);
          if (std::strcmp(optarg, "all") == 0 || std::strcmp(optarg, datatypeName(type)) == 0) o->types.push_back(type);
        }
        ok = !o->types.empty();
        break;
      }
      case 'o': {
        o->ops.clear();
        for (int i = 0; i <= fwAvg; ++i) {  // the bitwise ops are not benchmarked
          const auto op = static_cast<fwRedOp_t>(i);
          if (std::strcmp(optarg, "all") == 0 || std::strcmp(optarg, opName(op)) == 0) o->ops.push_back(op);
        }
        ok = !o->ops.empty();
        break;
      }
      default: ok = false;
    }
    if (!ok) {
      if (c != 'h') std::fprintf(stderr, "%s: bad value for -%c: %s\n", argv[0], c, optarg ? optarg : "");
      return false;
    }
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], o->minBytes, o->maxBytes);
    return false;
  }
  if (!usesOp) o->ops = {fwSum};
  if (o->compressed()) {
    for (fwDataType_t t : o->types) {
      if (t != fwFloat32 && t != fwFloat16 && t != fwBfloat16) {
        std::fprintf(stderr, "%s: -q %s compresses float, half or bfloat16 data, not %s\n", argv[0],
                     compressionName(o->compression.kind), datatypeName(t));
        return false;
      }
    }
  }
  return optind == argc;
}

}  // namespace fairway::perf
