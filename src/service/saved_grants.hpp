// Between the live lease book and its saved form (lease_state.hpp): what a service writes after
// every change of its grants, and what a restarted one takes back — the leases whose holder
// process or bound process group is still there, under keepers (job_keeper.hpp).
#pragma once

#include <functional>
#include <memory>
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

namespace gf::service {

// The service's grants on disk: rewritten before grants are sent (and before a bound job is
// acknowledged), and at the end of a loop turn that changed them otherwise. A failure to write
// is logged (once) and the service goes on: its leases are then only as safe across a restart as
// the last file written.
class GrantSaver {
 public:
  using Log = std::function<void(const std::string &)>;
  GrantSaver(LeaseBook &book, JobKeeper &keeper, std::function<HolderProcess(ClientId)> holder_of,
             int64_t started_ms, Log log);
  ~GrantSaver();

  // Opens PATH (SavedBookFile) and takes back the leases saved there (restore_grants), logging
  // what it could not use. Without the file (logged), nothing is saved from then on.
  void open(const std::string &path, double now);
  void save();
  void changed() { changed_ = true; }
  void save_if_changed() {
    if (changed_) save();
  }
  // The service stops: the grants as they stand stay on disk (a stop is often a restart, and the
  // next service must not hand out the devices of jobs that outlive this one); with no lease
  // left there is nothing to keep, and nothing is left behind.
  void finish();

 private:
  LeaseBook &book_;
  JobKeeper &keeper_;
  std::function<HolderProcess(ClientId)> holder_of_;
  int64_t started_ms_;
  Log log_;
  std::unique_ptr<SavedBookFile> file_;  // null when the files could not be had (logged)
  bool changed_ = false;
  bool warned_ = false;
};

}  // namespace gf::service
