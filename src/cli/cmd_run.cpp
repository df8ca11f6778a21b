#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/commands.hpp"
#include "cli/detach.hpp"
#include "git/uncommitted.hpp"
#include "jobs/dry_run.hpp"
#include "jobs/record.hpp"
#include "jobs/run_flags.hpp"
#include "jobs/run_job.hpp"
#include "sandbox/plan.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/strings.hpp"

namespace mullet::cli {
namespace {

constexpr std::int64_t not_given = std::numeric_limits<std::int64_t>::min();

struct RunOptions {
  std::string message;
  std::string message_file;
  std::string base;
  std::string executor;
  std::string command;
  std::string title;
  std::string setup;
  std::string model;
  std::string continue_job;
  std::string on;  // --on ENGINE: local or slurm
  std::vector<std::string> gates;
  std::int64_t nodes = not_given;
  std::vector<std::string> node_specs;  // --node EXECUTOR[:MODEL]
  std::int64_t attempts = not_given;
  bool json = false;
  bool dry_run = false;
  bool quiet = false;
  bool detach = false;
  bool include_uncommitted = false;
  int report_id_fd = -1;  // set in the detached child (see cli/detach.hpp)
};

// The largest task a job record holds (jobs/record.cpp).
constexpr std::size_t max_task_bytes = 8U << 20U;

// At most max_task_bytes of a stream: a task file may be a pipe (`-F <(...)`),
// so it is not required to be a regular file, but /dev/zero must not fill
// our memory.
std::string read_task(std::istream& in, const std::string& name) {
  std::string task(max_task_bytes + 1, '\0');
  in.read(task.data(), static_cast<std::streamsize>(task.size()));
  if (in.bad()) throw usage_error("cannot read the task file " + name);
  task.resize(static_cast<std::size_t>(in.gcount()));
  if (task.size() > max_task_bytes) {
    throw usage_error("the task file " + name + " is longer than " + std::to_string(max_task_bytes >> 20U) + " MiB");
  }
  return task;
}

std::string read_prompt(const RunOptions& options) {
  if (!options.message.empty() && !options.message_file.empty()) throw usage_error("give either -m or -F, not both");
  std::string prompt = options.message;
  if (options.message_file == "-") {
    prompt = read_task(std::cin, "(stdin)");
  } else if (!options.message_file.empty()) {
    if (util::is_directory(options.message_file)) {
      throw usage_error("cannot read the task file " + options.message_file + ": it is a directory");
    }
    std::ifstream file(options.message_file, std::ios::binary);
    if (!file) throw usage_error("cannot read the task file " + options.message_file + ": " + util::errno_text(errno));
    prompt = read_task(file, options.message_file);
  }
  if (util::trim(prompt).empty()) throw usage_error("no task given", "say what to do with -m TEXT or -F FILE");
  return prompt;
}

// More attempts of a job that ended, with a new instruction: the job keeps
// its task, base, executor, gates and the flags it was started with.
int continue_job(const RunOptions& options, const std::string& instruction,
                 const std::function<void(const std::string&)>& report_id) {
  jobs::RunRequest request;
  request.instruction = instruction;
  request.show_worker_output = !options.quiet && !options.json && !report_id;
  request.on_created = report_id;
  const auto outcome = take_up_job(options.continue_job, request);
  if (!report_id) print_run_outcome(outcome, options.json);
  return static_cast<int>(outcome.exit_code);
}

// `--node EXECUTOR[:MODEL]` applied to a node's configuration; returns the
// flags its record keeps for resume.
nlohmann::json apply_node_spec(config::Config& node, const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string executor = spec.substr(0, colon);
  node.set_from_flag("run.executor", executor, "--node");
  nlohmann::json flags = {{"run.executor", executor}};
  if (colon != std::string::npos) {
    if (executor == "command") {
      throw usage_error("--node " + spec + ": the command executor runs no model",
                        "drop :MODEL, or name an agent: --node claude:MODEL or --node opencode:MODEL");
    }
    const std::string model = spec.substr(colon + 1);
    node.set_from_flag(executor + ".model", model, "--node");
    flags[executor + ".model"] = model;
  }
  return flags;
}

// The commit a job starts from and, when it is one of the uncommitted
// changes (--include-uncommitted), the HEAD they were on. Without --base, a
// note tells that uncommitted changes stay out, or that there were none to take.
std::pair<git_oid, std::optional<git_oid>> choose_base(const git::Repository& repo, const RunOptions& options) {
  if (!options.base.empty() && !options.include_uncommitted) return {repo.resolve_commit(options.base), std::nullopt};
  const git_oid head = repo.head_commit();
  const git_oid base = options.base.empty() ? head : repo.resolve_commit(options.base);
  const std::string head_name = "HEAD (" + short_sha(git::oid_to_string(head)) + ")";
  if (options.include_uncommitted) {
    if (git_oid_cmp(&base, &head) != 0) {
      throw usage_error("--include-uncommitted takes the changes made on HEAD, and --base names another commit",
                        "drop --base, or commit the changes first");
    }
    const auto settings = load_config(&repo, head).settings();
    const auto made =
        git::commit_uncommitted_changes(repo, head, settings.limits.file_mb.bytes(), git::user_identity(repo));
    if (made) return {*made, head};
    std::cerr << "note: the work tree has no uncommitted changes; the job starts from " << head_name << "\n";
    return {head, std::nullopt};
  }
  bool dirty = false;
  try {
    dirty = git::has_uncommitted_changes(repo, head);
  } catch (const Error&) {
    // Only a note depends on it: a work tree git cannot read stays unmentioned.
  }
  if (dirty) {
    std::cerr << "note: the job starts from " << head_name
              << " and leaves your uncommitted changes out (--include-uncommitted takes them along)\n";
  }
  return {base, std::nullopt};
}

// `run --dry-run` of a job of several nodes: each node's plans, under its number.
int print_node_plans(const git::Repository& repo, const std::vector<config::Settings>& nodes, const git_oid& base,
                     const std::string& prompt, const std::vector<config::Gate>& gates, bool json) {
  nlohmann::json planned = nlohmann::json::array();
  std::string text = "base " + git::oid_to_string(base) + "\n";
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const int number = static_cast<int>(n) + 1;
    const auto plans = jobs::job_plans(repo, nodes[n], "NEW-JOB", base, prompt, gates, number);
    nlohmann::json phases = nlohmann::json::array();
    text += "node " + std::to_string(number) + " (" + nodes[n].run.executor + ")\n";
    for (const auto& plan : plans) {
      phases.push_back(sandbox::to_json(plan));
      text += sandbox::describe(plan);
    }
    planned.push_back({{"number", number}, {"phases", phases}});
  }
  if (json) {
    std::cout << nlohmann::json{{"base", git::oid_to_string(base)}, {"nodes", planned}}.dump(2) << "\n";
  } else {
    // The setup and gate commands may come from the repository's config.
    std::cout << util::terminal_safe(text);
  }
  return 0;
}

// Where the job runs: --on, else [dispatch] engine. A job of several nodes
// dispatched is one job array, a task per node.
std::string dispatch_engine(const RunOptions& options, const config::Settings& settings) {
  return options.on.empty() ? settings.dispatch.engine : options.on;
}

int run(const RunOptions& options) {
  if (options.detach) {
    if (options.dry_run) {
      throw usage_error("--detach and --dry-run do not go together", "--dry-run runs nothing, so nothing is detached");
    }
    if (options.report_id_fd >= 0) throw usage_error(std::string(report_id_fd_option) + " is not for --detach");
    // The child cannot read our stdin: a task given there is read here.
    std::optional<std::string> task_on_stdin;
    if (options.message_file == "-") task_on_stdin = read_prompt(options);
    return run_detached(task_on_stdin, options.json);
  }
  std::function<void(const std::string&)> report_id;
  if (options.report_id_fd >= 0) report_id = detached_child(options.report_id_fd);
  const std::string prompt = read_prompt(options);
  if (!options.continue_job.empty()) return continue_job(options, prompt, report_id);
  const git::Repository repo = open_repository();
  const auto [base, base_head] = choose_base(repo, options);
  config::Config config = load_config(&repo, base);
  if (!options.command.empty()) {
    config.set_from_flag("run.command", options.command, "--command");
    if (options.executor.empty()) config.set_from_flag("run.executor", std::string("command"), "--command");
  }
  if (!options.executor.empty()) config.set_from_flag("run.executor", options.executor, "--executor");
  if (!options.setup.empty()) config.set_from_flag("run.setup", options.setup, "--setup");
  if (options.attempts != not_given) config.set_from_flag("run.attempts", options.attempts, "--attempts");
  if (!options.model.empty()) {
    // The chosen executor's model key: [claude] model or [opencode] model.
    const auto& executor = std::get<std::string>(config.entry("run.executor").value);
    if (executor == "command") {
      throw usage_error("--model: the command executor runs no model",
                        "drop --model, or choose an agent with --executor claude or --executor opencode");
    }
    config.set_from_flag(executor + ".model", options.model, "--model");
  }
  if (options.gates.size() > config::max_gates) {
    throw usage_error("--gate: at most " + std::to_string(config::max_gates) + " gates are allowed");
  }
  std::vector<config::Gate> gates;
  for (const auto& command : options.gates) {
    if (util::trim(command).empty()) throw usage_error("--gate needs a command");
    gates.push_back({config::default_gate_name(command), command, 0, "--gate"});
    if (auto message = config::check_gate(gates.back()); !message.empty()) throw usage_error("--gate: " + message);
  }

  // A job of several nodes: each node's settings, and its flags for resume.
  std::vector<config::Settings> node_settings;
  nlohmann::json node_flags = nlohmann::json::array();
  if (options.nodes != not_given && options.nodes != 1) {
    for (std::int64_t n = 0; n < options.nodes; ++n) node_settings.push_back(config.settings());
  }
  if (options.node_specs.size() > static_cast<std::size_t>(jobs::max_nodes)) {
    throw usage_error("--node: at most " + std::to_string(jobs::max_nodes) + " nodes are allowed");
  }
  // One --node is a job of one node that runs that executor.
  for (const auto& spec : options.node_specs) {
    config::Config node = config;
    const nlohmann::json flags = apply_node_spec(node, spec);
    if (options.node_specs.size() == 1) {
      config = node;
      break;
    }
    node_settings.push_back(node.settings());
    node_flags.push_back(flags);
  }

  const config::Settings settings = config.settings();
  if (options.dry_run && !node_settings.empty())
    return print_node_plans(repo, node_settings, base, prompt, gates, options.json);
  if (options.dry_run) {
    const auto plans = jobs::job_plans(repo, settings, "NEW-JOB", base, prompt, gates);
    if (options.json) {
      nlohmann::json phases = nlohmann::json::array();
      for (const auto& plan : plans) phases.push_back(sandbox::to_json(plan));
      std::cout << nlohmann::json{{"base", git::oid_to_string(base)}, {"phases", phases}}.dump(2) << "\n";
    } else {
      // The setup and gate commands may come from the repository's config.
      std::string text = "base " + git::oid_to_string(base) + "\n";
      for (const auto& plan : plans) text += sandbox::describe(plan);
      std::cout << util::terminal_safe(text);
    }
    return 0;
  }

  jobs::RunRequest request;
  request.dispatch_engine = dispatch_engine(options, settings);
  request.prompt = prompt;
  request.title = options.title;
  request.base = base;
  request.base_head = base_head;
  request.show_worker_output = !options.quiet && !options.json;
  request.gates = gates;
  request.run_flags = jobs::run_flags_json(config, gates);
  request.node_settings = node_settings;
  if (!node_flags.empty()) request.run_flags["nodes"] = node_flags;
  if (report_id) {
    // Detached: nobody watches its stderr, and nobody reads what it prints.
    request.show_worker_output = false;
    request.on_created = report_id;
  }
  const auto outcome = jobs::run_job(repo, settings, request);
  if (report_id) return static_cast<int>(outcome.exit_code);
  print_run_outcome(outcome, options.json);
  return static_cast<int>(outcome.exit_code);
}

}  // namespace

void add_run_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Delegate a task to a worker in a sandboxed private clone");
  sub->add_option("-m,--message", options->message, "The task, as text")->type_name("MESSAGE");
  sub->add_option("-F,--file", options->message_file, "Read the task from FILE (- for stdin)")->type_name("FILE");
  sub->add_option("--base", options->base, "Commit to start from (default: HEAD)")->type_name("COMMIT");
  sub->add_flag("--include-uncommitted", options->include_uncommitted,
                "Start from a commit of HEAD plus the work tree's uncommitted changes and untracked files that are "
                "not ignored (the index, HEAD and work tree stay as they are)");
  sub->add_option("--executor", options->executor, "Worker: claude (default), opencode or command")->type_name("NAME");
  sub->add_option("--command", options->command, "Shell command for the command executor (implies it)")
      ->type_name("CMD");
  sub->add_option("--title", options->title, "A title for the job (default: the task's first line)")
      ->type_name("TITLE");
  sub->add_option("--setup", options->setup, "Shell command run in the clone before the worker, with the setup grants")
      ->type_name("CMD");
  sub->add_option("--gate", options->gates,
                  "A check the result must pass (repeatable): a shell command run in the sandbox, without network, "
                  "on a fresh checkout of the result")
      ->type_name("CMD");
  sub->add_option("--model", options->model,
                  "The worker's model: claude's --model (an alias or a full name), opencode's provider/model")
      ->type_name("MODEL");
  sub->add_option("--attempts", options->attempts, "Worker runs per job: a failed gate sends the worker back")
      ->type_name("N");
  auto* nodes = sub->add_option("--nodes", options->nodes,
                                "Run the task N times at once, each node in a clone of its own (1 to 16); `merge` "
                                "takes the chosen node")
                    ->type_name("N")
                    ->check(CLI::Range(1, jobs::max_nodes));
  auto* node = sub->add_option("--node", options->node_specs,
                               "A node running EXECUTOR, with MODEL if given (repeatable: one node each; mixes "
                               "executors and models)")
                   ->type_name("EXECUTOR[:MODEL]")
                   ->check(CLI::Validator(
                       [](const std::string& spec) {
                         return spec.empty() || spec[0] == ':' ? std::string("names no executor") : std::string();
                       },
                       "EXECUTOR[:MODEL]"));
  nodes->excludes(node);
  node->excludes(sub->get_option("--executor"));
  node->excludes(sub->get_option("--model"));
  auto* continued = sub->add_option("--continue", options->continue_job,
                                    "Run more attempts of a job that ended, with -m/-F as a new instruction; it "
                                    "starts from the job's last snapshot with the job's own settings")
                        ->type_name("JOB");
  auto* on = sub->add_option("--on", options->on,
                             "Where the job runs: local (here) or slurm (submitted with sbatch; the record shows it "
                             "queued at once). Default: [dispatch] engine")
                 ->type_name("ENGINE")
                 ->check(CLI::IsMember({"local", "slurm"}));
  sub->add_flag("--json", options->json, "Print the job record as one JSON object");
  sub->add_flag("--dry-run", options->dry_run, "Print each phase's sandbox plan and run nothing");
  sub->add_flag("-q,--quiet", options->quiet, "Do not echo the worker's output");
  sub->add_flag(detach_option, options->detach,
                "Run the job in the background: print its id once it exists and return (follow it with `git "
                "mullet wait`)");
  // For the detached child only, so not in the help (group "").
  sub->add_option(report_id_fd_option, options->report_id_fd, "The descriptor to write the job's id to")->group("");
  // A continued job keeps what it was started with.
  on->excludes(continued);
  for (const char* name : {"--base", "--include-uncommitted", "--executor", "--command", "--title", "--setup", "--gate",
                           "--attempts", "--model", "--dry-run", "--nodes", "--node"}) {
    continued->excludes(sub->get_option(name));
  }
  sub->callback([options, &chosen] { chosen = [options] { return run(*options); }; });
}

}  // namespace mullet::cli
