# fish completion for git-mullet.
#
# Installed as share/fish/vendor_completions.d/git-mullet.fish. It completes
# `git-mullet ...`; fish's git completion (3.4 and later) hands `git mullet ...`
# to it, as it does for every git-* command on PATH. Job ids come with their
# state and title, only those each command accepts.
# tests/e2e/test_cli_surface.sh fails when an option of the parser is
# missing here.

set -l __git_mullet_commands run list show diff log wait resume stop shell merge discard config doctor help

# "ID<TAB>STATE TITLE" lines: fish shows what follows the tab as the description.
function __git_mullet_jobs
    git mullet __complete-jobs $argv[1] 2>/dev/null
end

function __git_mullet_commits
    echo HEAD
    git for-each-ref --format='%(refname:short)' refs/heads refs/tags refs/remotes 2>/dev/null
end

complete -c git-mullet -f

# No command yet.
set -l none "not __fish_seen_subcommand_from $__git_mullet_commands"
complete -c git-mullet -n $none -l version -d 'Print the version'
complete -c git-mullet -n $none -s h -l help -d 'Show help'
complete -c git-mullet -n $none -a run -d 'Delegate a task to a worker in a sandboxed private clone'
complete -c git-mullet -n $none -a list -d 'List jobs, newest first'
complete -c git-mullet -n $none -a show -d "Show one job's record"
complete -c git-mullet -n $none -a diff -d 'Show what a job changed against its base'
complete -c git-mullet -n $none -a log -d "Print the worker's output"
complete -c git-mullet -n $none -a resume -d 'Continue an interrupted, failed or cancelled job'
complete -c git-mullet -n $none -a wait -d 'Follow a job to its end and exit as it ended'
complete -c git-mullet -n $none -a merge -d "Fetch a job's result in as a new branch"
complete -c git-mullet -n $none -a stop -d 'Cancel a running job and wait until it has ended'
complete -c git-mullet -n $none -a shell -d "Open a shell in a sandbox over a job's last snapshot"
complete -c git-mullet -n $none -a discard -d "Delete jobs' scratch directories and refs"
complete -c git-mullet -n $none -a config -d 'Print the effective configuration'
complete -c git-mullet -n $none -a doctor -d 'Check what the sandbox needs on this machine'
complete -c git-mullet -n $none -a help -d "Show a command's help"

# run
complete -c git-mullet -n '__fish_seen_subcommand_from run' -s m -l message -x -d 'The task, as text'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -s F -l file -r -F -d 'Read the task from FILE (- for stdin)'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l base -x -a '(__git_mullet_commits)' -d 'Commit to start from'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l executor -x -a 'claude opencode command' -d 'The worker'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l command -x -d 'Shell command for the command executor'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l title -x -d 'A title for the job'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l setup -x -d 'Shell command run before the worker'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l gate -x -d 'A check the result must pass (repeatable)'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l attempts -x -d 'Worker runs when gates fail'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l model -x -d 'Model of the agent worker'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l nodes -x -d 'Run the task N times at once, a node each'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l node -x -a 'claude opencode command' -d 'A node running EXECUTOR[:MODEL] (repeatable)'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l on -x -a 'local slurm' -d 'Where the job runs: here or submitted to Slurm'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l continue -x -a '(__git_mullet_jobs continue)' -d 'More attempts of a job that ended, with a new instruction'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l json -d 'Print the job record as JSON'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l dry-run -d 'Print the sandbox plan and run nothing'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l include-uncommitted -d 'Start from HEAD plus the uncommitted changes'
complete -c git-mullet -n '__fish_seen_subcommand_from run' -s q -l quiet -d "Do not echo the worker's output"
complete -c git-mullet -n '__fish_seen_subcommand_from run' -l detach -d 'Run in the background: print the job id and return'

# resume
complete -c git-mullet -n '__fish_seen_subcommand_from resume' -s q -l quiet -d "Do not echo the worker's output"
complete -c git-mullet -n '__fish_seen_subcommand_from resume' -l json -d 'Print the job record as JSON'
# wait
complete -c git-mullet -n '__fish_seen_subcommand_from wait' -s q -l quiet -d "Print only the outcome, not the job's output"
complete -c git-mullet -n '__fish_seen_subcommand_from wait' -l json -d "Print the finished job's record as JSON"
complete -c git-mullet -n '__fish_seen_subcommand_from wait' -l timeout -x -d 'Give up after SECONDS (the job goes on)'
# shell
complete -c git-mullet -n '__fish_seen_subcommand_from shell' -l record -d "Snapshot the shell's tree afterwards as a new attempt"
# list, show, doctor, stop, log
complete -c git-mullet -n '__fish_seen_subcommand_from list show doctor stop' -l json -d 'Print JSON'
complete -c git-mullet -n '__fish_seen_subcommand_from list discard' -l state -x -a 'running succeeded no_changes failed refused cancelled interrupted queued damaged' -d 'Jobs in STATE'
complete -c git-mullet -n '__fish_seen_subcommand_from list' -s n -l max-count -x -d 'Only the newest N jobs'
complete -c git-mullet -n '__fish_seen_subcommand_from stop' -l timeout -x -d 'Wait at most SECONDS for it to end'
complete -c git-mullet -n '__fish_seen_subcommand_from log' -l raw -d 'Print the events and output as recorded'
# diff: some of the git diff options it passes through (git-mullet(1))
complete -c git-mullet -n '__fish_seen_subcommand_from diff' -l stat -d 'git diff --stat'
complete -c git-mullet -n '__fish_seen_subcommand_from diff' -l name-only -d 'git diff --name-only'
complete -c git-mullet -n '__fish_seen_subcommand_from diff' -l name-status -d 'git diff --name-status'
complete -c git-mullet -n '__fish_seen_subcommand_from diff' -l numstat -d 'git diff --numstat'
complete -c git-mullet -n '__fish_seen_subcommand_from diff' -l patch -d 'git diff --patch'
# merge, discard
complete -c git-mullet -n '__fish_seen_subcommand_from merge' -l branch -x -d 'Branch name (default: mullet/<id>)'
complete -c git-mullet -n '__fish_seen_subcommand_from merge' -l force -d 'Take the result of a job that did not succeed'
complete -c git-mullet -n '__fish_seen_subcommand_from discard' -l force -d 'Stop a running job first'
complete -c git-mullet -n '__fish_seen_subcommand_from discard' -l all -d 'Every job that is not running'
complete -c git-mullet -n '__fish_seen_subcommand_from discard' -s y -l yes -d 'Do not ask before discarding what --state or --all picked'
# config
complete -c git-mullet -n '__fish_seen_subcommand_from config' -l base -x -a '(__git_mullet_commits)' -d 'Read .mullet.toml from this commit'
# help
complete -c git-mullet -n '__fish_seen_subcommand_from help' -a "run list show diff log wait resume stop shell merge discard config doctor"

# Commands that take a JOB: the jobs each accepts.
for command in show diff log wait resume stop shell merge discard
    complete -c git-mullet -n "__fish_seen_subcommand_from $command" -a "(__git_mullet_jobs $command)"
end

# Every command takes -h/--help.
complete -c git-mullet -n "__fish_seen_subcommand_from $__git_mullet_commands" -s h -l help -d 'Show help'
