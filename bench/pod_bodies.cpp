// Writes the benchmark bodies (pod_shapes.hpp) as files for bench/e2e.sh:
//   pod_bodies OUTDIR  ->  OUTDIR/{small,typical,large,huge}.json
#include <cstdio>
#include <fstream>

#include "pod_shapes.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pod_bodies OUTDIR\n");
    return 2;
  }
  for (const auto& shape : trainenv::bench::pod_shapes()) {
    const std::string path = std::string(argv[1]) + "/" + shape.name + ".json";
    std::ofstream out(path, std::ios::binary);
    out << shape.body;
    if (!out.flush()) {
      std::fprintf(stderr, "pod_bodies: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%s\t%zu bytes\n", path.c_str(), shape.body.size());
  }
}
