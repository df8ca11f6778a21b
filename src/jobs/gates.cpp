#include "jobs/gates.hpp"

#include "git/handles.hpp"
#include "util/strings.hpp"

namespace mullet::jobs {
namespace {

constexpr std::size_t gate_feedback_bytes = 3000;

}  // namespace

std::vector<config::Gate> job_gates(const config::Settings& settings, const std::vector<config::Gate>& extra) {
  std::vector<config::Gate> all = settings.gates;
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

GateRecord gate_record(const config::Gate& gate, const git_oid& commit, const sandbox::RunResult& run,
                       const PhaseRecord& phase) {
  GateRecord result;
  result.name = gate.name;
  result.command = gate.command;
  result.commit = git::oid_to_string(commit);
  result.exit_code = run.status.code;
  result.ended_by = run.ended_by;
  result.duration_ms = run.duration_ms;
  result.passed = run.ended_by == sandbox::StopReason::exit && run.status.code == 0;
  result.output_tail = phase.output_tail;
  return result;
}

std::string how_gate_ended(const GateRecord& gate) {
  const sandbox::StopReason reason = gate.ended_by.value_or(sandbox::StopReason::exit);
  return reason == sandbox::StopReason::exit ? "exit code " + std::to_string(gate.exit_code)
                                             : sandbox::describe_stop(reason);
}

std::string gate_feedback(const std::string& task, const GateRecord& gate) {
  return task + "\n\n---\nYour previous attempt is in the work tree, but the check \"" + gate.name + "\" (`" +
         gate.command + "`) failed on it (" + how_gate_ended(gate) + "). The end of its output:\n\n" +
         util::tail(gate.output_tail, gate_feedback_bytes) + "\n\nFix the work so that this check passes.\n";
}

}  // namespace mullet::jobs
