// Reading an MPI hostfile as its launchers do: Open MPI's "host slots=N" lines and Hydra's
// "host:N" (MPICH, Intel MPI). A bottom header: includes nothing of the core.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trainenv::core {

// The hosts of `text`, once each, in the order first listed: a line's first word without a
// ":N" slot count; blank lines and '#' comments skipped, as both launchers skip them.
[[nodiscard]] std::vector<std::string> hostfile_hosts(std::string_view text);

}  // namespace trainenv::core
