// Between the live lease book and its saved form (lease_state.hpp): what a service writes after
// every change of its grants, and what a restarted one takes back — the leases whose holder
// process or bound process group is still there, under keepers (job_keeper.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "service/job_keeper.hpp"
#include "service/lease_book.hpp"
#include "service/lease_state.hpp"

namespace gf::service {

// Every lease of `book`, with who holds it (`holder_of` its client) and its bound group.
SavedBook save_grants(const LeaseBook &book, const JobKeeper &keeper,
                      const std::function<HolderProcess(ClientId)> &holder_of, int64_t started_ms);

// Puts back the leases of `saved` whose holder still runs or whose group still has processes,
// each under a keeper; the others ended while no service watched. Leases on devices that are no
// longer there (another UUID at that ordinal) or that do not fit are left out, each with a line
// in `log`. Lease ids continue after the saved ones. Returns how many were kept.
size_t restore_grants(const SavedBook &saved, LeaseBook &book, JobKeeper &keeper,
                      int64_t started_ms, double now,
                      const std::function<void(const std::string &)> &log);

}  // namespace gf::service
