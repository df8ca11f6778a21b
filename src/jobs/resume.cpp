#include "jobs/resume.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "executors/executor.hpp"
#include "jobs/dispatch.hpp"
#include "jobs/layout.hpp"
#include "jobs/liveness.hpp"
#include "jobs/nodes.hpp"
#include "jobs/run_job.hpp"
#include "jobs/run_to_end.hpp"
#include "jobs/slots.hpp"
#include "jobs/store.hpp"
#include "sandbox/runner.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/signals.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
bool resumable(JobState state) {
  return state == JobState::interrupted || state == JobState::failed || state == JobState::cancelled;
}

bool continuable(JobState state) {
  return !is_active(state);
}

std::string continued_prompt(const JobRecord& record, const std::string& instruction) {
  // The worker's summary is its own words, given back to it: bounded, so a
  // long one does not crowd out the task.
  constexpr std::size_t summary_bytes = 16U << 10U;
  std::string prompt = record.prompt + "\n\n---\nThis task was worked on before";
  if (!record.attempts.empty()) prompt += " (" + std::to_string(record.attempts.size()) + " attempts so far)";
  prompt += record.result.empty() ? "; nothing of it was kept, so the work tree is where the task started.\n"
                                  : "; the work tree holds the result so far.\n";
  if (!record.report.summary.empty()) {
    prompt += "\nThe summary of the last attempt:\n" + util::tail(record.report.summary, summary_bytes) + "\n";
  }
  std::vector<std::string> earlier;
  for (const auto& attempt : record.attempts) {
    if (!attempt.instruction.empty()) earlier.push_back(attempt.instruction);
  }
  for (std::size_t i = 0; i < earlier.size(); ++i) {
    prompt += "\nThe user's instruction " + std::to_string(i + 1) + " after the task, already worked on:\n" +
              earlier[i] + "\n";
  }
  prompt +=
      "\n---\nThe user's new instruction. Where it differs from the task or the earlier instructions, it "
      "rules:\n" +
      instruction + "\n";
  return prompt;
}

namespace {

// The node's claim of a dispatched job: its host name, and the scheduler's
// id from the batch job's environment when the host has not recorded it yet.
void claim_on_node(JobRecord& stored) {
  if (!stored.dispatch) throw usage_error("job " + stored.id + " was not dispatched to a scheduler");
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0 && is_host_name(host.data())) {
    stored.dispatch->node = host.data();
  }
  const auto env = util::current_environment();
  const auto id = env.find("SLURM_JOB_ID");
  // A batch job of an earlier submission that seemed to fail (sbatch timed
  // out, yet the controller took it) never takes the job on record.
  if (!stored.dispatch->scheduler_id.empty() && id != env.end() && id->second != stored.dispatch->scheduler_id) {
    throw usage_error("this batch job " + util::terminal_safe(util::first_line(id->second, 40)) + " is not job " +
                      stored.id + "'s (" + stored.dispatch->scheduler_id + "); it runs nothing");
  }
  if (stored.dispatch->scheduler_id.empty() && id != env.end() && is_scheduler_id(id->second)) {
    stored.dispatch->scheduler_id = id->second;
  }
}

// The prompt of a resumed run that starts from `result` (empty: the base).
std::string resumed(const std::string& prompt, const std::string& result) {
  return prompt + (result.empty() ? std::string()
                                  : "\n\n---\nThis task was started before and interrupted; the work tree holds the "
                                    "work done so far. Continue from there.\n");
}

// `resume` of a dispatched job that ended: queued again (the compare-and-swap
// lets one resume win) and submitted to its scheduler once more. A job
// array's nodes that did not end well (interrupted, failed, cancelled) are
// queued again and only they are submitted, as an array of their numbers;
// the others keep their result and their task's record.
RunOutcome resubmit(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                    const std::string& id, int only_node) {
  const auto queued = store.update(id, [&](JobRecord& stored) {
    const JobState now = effective_state(stored);
    // A job of several nodes that ended resumes the nodes that did not end
    // well, whatever the others did (as a local one does).
    if (stored.nodes.empty() ? !resumable(now) : is_active(now)) {
      throw usage_error("job " + stored.id + " is " + state_name(now) + " now; it cannot be resumed");
    }
    bool any = stored.nodes.empty();
    for (auto& node : stored.nodes) {
      const JobState was = effective_node_state(stored, node);
      if (!resumable(was) || (only_node != 0 && node.number != only_node)) {
        // A node left queued or running by an array the scheduler ended.
        if (is_active(node.state)) node.state = JobState::interrupted;
        continue;
      }
      node.state = JobState::queued;
      node.error.clear();
      node.finished_at.clear();
      node.dispatch = DispatchRecord{stored.dispatch->engine, "", "", ""};
      any = true;
    }
    if (!any) {
      throw usage_error((only_node == 0 ? "no node" : "node " + std::to_string(only_node)) + " of job " + stored.id +
                            " can be resumed",
                        "only an interrupted, failed or cancelled node can be resumed");
    }
    stored.state = JobState::queued;
    stored.error.clear();
    stored.finished_at.clear();
    stored.dispatch = DispatchRecord{stored.dispatch->engine, "", "", ""};
    settle_job(stored);
  });
  return submit_queued(repo, settings, store, queued.record);
}

// A task of a job array: claims its node from `queued` (the compare-and-swap
// on the job's ref: of two tasks for one node, one wins and the other finds
// it claimed) and runs that node alone, as a node of a local job runs.
RunOutcome run_array_task(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                          const StoredJob& found, const RunRequest& request) {
  const int number = request.node;
  if (number < 1 || static_cast<std::size_t>(number) > found.record.nodes.size()) {
    throw failure("internal error: node " + std::to_string(number) + " of job " + found.record.id);
  }
  const auto index = static_cast<std::size_t>(number - 1);
  NodeRun node;
  node.number = number;
  node.settings = request.node_settings.at(index);
  node.executor = executors::make_executor(node.settings.run.executor);
  if (node.executor->needs_api()) node.api = resolve_worker_api(node.settings, *node.executor);
  const auto spec = node.executor->prepare(
      {found.record.prompt, node.settings, jobs_directory(repo), node.api ? &node.api->access : nullptr});
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);
  const auto env = util::current_environment();
  const auto array = env.find("SLURM_ARRAY_JOB_ID");
  // dispatched_node checked it against the scheduler.
  if (array == env.end()) throw refused_error("this task of job " + found.record.id + " has no SLURM_ARRAY_JOB_ID");
  const auto claimed = store.update(found.record.id, [&](JobRecord& stored) {
    if (stored.nodes.size() != found.record.nodes.size() || !stored.dispatch) {
      throw usage_error("job " + stored.id + " changed while its task started; node " + std::to_string(number) +
                        " is not run");
    }
    auto& claim = stored.nodes.at(index);
    if (claim.state != JobState::queued) {
      throw usage_error("node " + std::to_string(number) + " of job " + stored.id + " is " + state_name(claim.state) +
                        ", not queued; this task runs nothing");
    }
    // Asked to stop between the scheduler's start and this claim.
    if (util::cancel_requested()) throw usage_error("the task was cancelled before it claimed its node");
    // A task of another array (one whose sbatch seemed to fail, then ran
    // after all) never takes a node of the array on record.
    if (!stored.dispatch->scheduler_id.empty() && stored.dispatch->scheduler_id != array->second) {
      throw usage_error("this task's array " + util::terminal_safe(array->second) + " is not job " + stored.id +
                        "'s (" + stored.dispatch->scheduler_id + "); node " + std::to_string(number) + " is not run");
    }
    if (stored.dispatch->scheduler_id.empty()) stored.dispatch->scheduler_id = array->second;
    claim.state = JobState::running;
    claim.error.clear();
    claim.finished_at.clear();
    claim.executor = spec.record;
    claim.dispatch = DispatchRecord{stored.dispatch->engine, array->second + "_" + std::to_string(number), "", ""};
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) == 0 && is_host_name(host.data())) {
      claim.dispatch->node = host.data();
    }
    settle_job(stored);
  });
  JobRecord record = claimed.record;
  const JobPaths paths = node_paths(repo, record.id, number);
  util::remove_tree(paths.git_dir);
  util::remove_tree(paths.work_tree);
  util::remove_tree(paths.gate);
  const std::string& result = record.nodes.at(index).result;
  node.start = git::oid_from_string(result.empty() ? record.base : result);
  node.prompt = resumed(record.prompt, result);
  return run_node_to_end(repo, settings, store, record, request, node);
}

// `resume JOB/N` (request.node), or `resume JOB` of a job of several: each
// node that was interrupted, failed or was cancelled runs on from its last
// snapshot, in a fresh clone of it, as more attempts of the same node. A
// node left running by a runner that died is on record as interrupted from
// then on (the claim changes the runner).
RunOutcome resume_nodes(const git::Repository& repo, const config::Settings& settings, JobStore& store,
                        const StoredJob& found, const RunRequest& request) {
  if (!request.instruction.empty()) {
    throw usage_error("job " + found.record.id + " has several nodes; `run --continue` takes a job of one",
                      "take one node's result with: git mullet merge " + found.record.id + "/N");
  }
  if (request.node_settings.size() != found.record.nodes.size()) {
    throw failure("internal error: the nodes' settings do not match job " + found.record.id);
  }
  const auto wanted = [&](const JobRecord& record) {
    std::vector<int> numbers;
    for (const auto& node : record.nodes) {
      if ((request.node == 0 || request.node == node.number) && resumable(effective_node_state(record, node))) {
        numbers.push_back(node.number);
      }
    }
    return numbers;
  };
  const auto refuse = [&](const JobRecord& record) {
    if (request.node != 0) {
      const auto& node = record.nodes.at(static_cast<std::size_t>(request.node - 1));
      throw usage_error("node " + std::to_string(request.node) + " of job " + record.id + " is " +
                        state_name(effective_node_state(record, node)) +
                        "; only an interrupted, failed or cancelled node can be resumed");
    }
    throw usage_error("job " + record.id + " is " + state_name(effective_state(record)) +
                          "; only an interrupted, failed or cancelled job can be resumed",
                      "resume one node of it: git mullet resume " + record.id + "/N");
  };
  if (is_active(effective_state(found.record))) {
    throw usage_error("job " + found.record.id + " is still running",
                      "wait for it: git mullet wait " + found.record.id);
  }
  if (wanted(found.record).empty()) refuse(found.record);
  std::vector<NodeRun> nodes;
  for (const int number : wanted(found.record)) {
    NodeRun node;
    node.number = number;
    node.settings = request.node_settings.at(static_cast<std::size_t>(number - 1));
    node.executor = executors::make_executor(node.settings.run.executor);
    if (node.executor->needs_api()) node.api = resolve_worker_api(node.settings, *node.executor);
    node.executor->prepare(
        {found.record.prompt, node.settings, jobs_directory(repo), node.api ? &node.api->access : nullptr});
    nodes.push_back(std::move(node));
  }
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);

  const auto claimed = store.update(found.record.id, [&](JobRecord& stored) {
    if (is_active(effective_state(stored))) {
      throw usage_error("job " + stored.id + " is running now; it cannot be resumed");
    }
    const auto now = wanted(stored);
    for (const auto& node : nodes) {
      if (std::find(now.begin(), now.end(), node.number) == now.end()) refuse(stored);
    }
    for (auto& node : stored.nodes) {
      if (node.state == JobState::running) node.state = JobState::interrupted;
    }
    for (const auto& node : nodes) {
      auto& record = stored.nodes.at(static_cast<std::size_t>(node.number - 1));
      record.state = JobState::running;
      record.error.clear();
      record.finished_at.clear();
    }
    stored.finished_at.clear();
    stored.runner = current_runner(repository_key(repo));
    settle_job(stored);
  });
  JobRecord record = claimed.record;
  if (request.on_created) request.on_created(record.id);
  for (auto& node : nodes) {
    const JobPaths paths = node_paths(repo, record.id, node.number);
    util::remove_tree(paths.git_dir);
    util::remove_tree(paths.work_tree);
    util::remove_tree(paths.gate);
    const std::string& result = record.nodes.at(static_cast<std::size_t>(node.number - 1)).result;
    node.start = git::oid_from_string(result.empty() ? record.base : result);
    node.prompt = resumed(record.prompt, result);
  }
  return run_nodes_to_end(repo, settings, store, record, request, nodes);
}

}  // namespace

RunOutcome resume_job(const git::Repository& repo, const config::Settings& settings, const std::string& job_name,
                      const RunRequest& request) {
  if (request.node != 0 || !request.node_settings.empty()) {
    JobStore store(repo);
    const auto found = store.find(job_name);
    if (!found.record.nodes.empty() && request.dispatched) {
      return run_array_task(repo, settings, store, found, request);
    }
    if (!found.record.nodes.empty() && found.record.dispatch && request.instruction.empty()) {
      return resubmit(repo, settings, store, found.record.id, request.node);
    }
    if (!found.record.nodes.empty()) return resume_nodes(repo, settings, store, found, request);
  }
  const auto executor = executors::make_executor(settings.run.executor);
  JobStore store(repo);
  const auto found = store.find(job_name);
  const bool continuing = !request.instruction.empty();
  const bool dispatched = request.dispatched;
  if (!dispatched && !continuing && found.record.dispatch && resumable(effective_state(found.record))) {
    return resubmit(repo, settings, store, found.record.id, 0);
  }
  const auto takes = [continuing, dispatched](JobState state) {
    if (dispatched) return state == JobState::queued;
    return continuing ? continuable(state) : resumable(state);
  };
  const JobState state = effective_state(found.record);
  if (!takes(state)) {
    const std::string wait_hint = "wait for it: git mullet wait " + found.record.id;
    if (continuing)
      throw usage_error("job " + found.record.id + " is still running; it cannot be continued", wait_hint);
    throw usage_error("job " + found.record.id + " is " + state_name(state) + "; only an interrupted, failed or " +
                          "cancelled job can be resumed",
                      state == JobState::running
                          ? wait_hint
                          : "to give it a new instruction: git mullet run --continue " + found.record.id + " -m TEXT");
  }
  const std::string prompt = found.record.prompt;
  const std::optional<ResolvedApi> api =
      executor->needs_api() ? std::optional<ResolvedApi>(resolve_worker_api(settings, *executor)) : std::nullopt;
  const auto spec = executor->prepare({prompt, settings, jobs_directory(repo), api ? &api->access : nullptr});
  sandbox::find_bwrap();
  if (::geteuid() == 0) sandbox_uid_range(settings.sandbox);
  ::umask(022);

  // Claim the job: the compare-and-swap on its ref lets one resume win.
  const auto claimed = store.update(found.record.id, [&](JobRecord& stored) {
    const JobState now = effective_state(stored);
    if (!takes(now)) {
      throw usage_error("job " + stored.id + " is " + state_name(now) + " now; it cannot be " +
                        (continuing ? "continued" : "resumed"));
    }
    stored.state = JobState::running;
    stored.error.clear();
    stored.finished_at.clear();
    stored.runner = current_runner(repository_key(repo));
    stored.executor = spec.record;
    if (dispatched) claim_on_node(stored);
  });
  JobRecord record = claimed.record;
  if (request.on_created) request.on_created(record.id);

  // Continue from the last snapshot in a fresh clone of it: whatever the
  // interrupted worker left unsnapshotted is not trusted.
  const JobPaths paths = job_paths(repo, record.id);
  util::remove_tree(paths.git_dir);
  util::remove_tree(paths.work_tree);
  util::remove_tree(paths.gate);
  const git_oid start = git::oid_from_string(record.result.empty() ? record.base : record.result);
  // What the prompt says of the job's past is read from the record as it
  // was claimed (found.record may be older).
  const std::string resumed_prompt =
      continuing ? continued_prompt(claimed.record, request.instruction) : resumed(prompt, record.result);
  return run_to_end(repo, settings, store, record, request, *executor, api, start, resumed_prompt);
}

std::optional<int> parse_array_task(const std::string& text, std::size_t nodes) {
  if (text.empty() || text.size() > 2 || text[0] == '0' || text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int number = std::stoi(text);
  if (number < 1 || static_cast<std::size_t>(number) > nodes) return std::nullopt;
  return number;
}

int dispatched_node(const git::Repository& repo, const JobRecord& record) {
  if (record.nodes.empty()) return 0;
  const auto refuse = [&](const std::string& why) {
    return refused_error("this task of job " + record.id + " runs nothing: " + why,
                         "a task of a job array is started by its scheduler, which sets SLURM_ARRAY_JOB_ID and "
                         "SLURM_ARRAY_TASK_ID");
  };
  if (!record.dispatch) throw refuse("the job was not dispatched to a scheduler");
  const auto env = util::current_environment();
  const auto task_text = env.find("SLURM_ARRAY_TASK_ID");
  const auto array = env.find("SLURM_ARRAY_JOB_ID");
  if (task_text == env.end() || array == env.end()) throw refuse("it is not a task of a job array");
  const auto task = parse_array_task(task_text->second, record.nodes.size());
  if (!task) {
    throw refuse("SLURM_ARRAY_TASK_ID '" + util::terminal_safe(util::first_line(task_text->second, 40)) +
                 "' is not a node's number (1.." + std::to_string(record.nodes.size()) + ")");
  }
  const std::string& id = array->second;
  if (id.empty() || id.size() > 20 || id.find_first_not_of("0123456789") != std::string::npos) {
    throw refuse("SLURM_ARRAY_JOB_ID '" + util::terminal_safe(util::first_line(id, 40)) + "' is not a job id");
  }
  if (!record.dispatch->scheduler_id.empty() && id != record.dispatch->scheduler_id) {
    throw refuse("its array " + id + " is not the job's (" + record.dispatch->scheduler_id + ")");
  }
  // The scheduler's word, not the environment's: this very task runs, under
  // this repository's name for the job.
  const std::string task_id = id + "_" + std::to_string(*task);
  const auto view = make_dispatch_engine(record.dispatch->engine)->status(task_id, record.id);
  const std::string name = scheduler_job_name(repository_key(repo), record.id);
  if (view.status != SchedulerStatus::running || view.name != name) {
    throw refuse("the scheduler's task " + task_id + " is not a running task of this repository's job (" +
                 (view.status == SchedulerStatus::unknown ? std::string("the scheduler did not answer")
                                                          : "it is " + util::terminal_safe(view.state) + ", named '" +
                                                                util::terminal_safe(view.name) + "'") +
                 ")");
  }
  return *task;
}

RunOutcome fail_queued(const git::Repository& repo, const std::string& id, int node, const Error& error) {
  JobStore store(repo);
  const std::string why = std::string("the job could not be taken up as it was queued: ") + error.what();
  const auto updated = store.update(id, [&](JobRecord& stored) {
    if (node == 0) {
      if (stored.state != JobState::queued) return;
      stored.state = JobState::failed;
      stored.error = why;
      stored.finished_at = util::now_utc_ms();
      return;
    }
    if (static_cast<std::size_t>(node) > stored.nodes.size()) return;
    auto& failed = stored.nodes.at(static_cast<std::size_t>(node - 1));
    if (failed.state != JobState::queued) return;
    failed.state = JobState::failed;
    failed.error = why;
    failed.finished_at = util::now_utc_ms();
    settle_job(stored);
    if (!is_active(stored.state)) stored.finished_at = util::now_utc_ms();
  });
  return {updated.record, static_cast<ExitCode>(exit_code_for(updated.record.state)), error.hint()};
}

}  // namespace mullet::jobs
