# bash completion for git-mullet.                       -*- shell-script -*-
#
# Defines _git_mullet, which git's own completion calls for `git mullet ...`
# (it loads this file through bash-completion's loader, from
# share/bash-completion/completions/git-mullet). It completes commands, their
# options, refs for --base, and for JOB arguments the jobs each command
# accepts (`git mullet __complete-jobs COMMAND`).
# tests/e2e/test_cli_surface.sh fails when an option of the parser is
# missing here.

# Job ids the command accepts, in the current repository (honours
# `git -C DIR mullet ...`).
__git_mullet_jobs ()
{
	__git mullet __complete-jobs "$1" 2>/dev/null | cut -f1
}

_git_mullet ()
{
	local subcommands="run list show diff log wait resume stop shell merge discard config doctor help"
	local subcommand
	subcommand="$(__git_find_on_cmdline "$subcommands")"

	if [ -z "$subcommand" ]; then
		case "$cur" in
		-*)	__gitcomp "--help --version" ;;
		*)	__gitcomp "$subcommands" ;;
		esac
		return
	fi

	# The value of an option given as a separate word.
	case "$subcommand,$prev" in
	run,-m|run,--message|run,--command|run,--setup|run,--gate|run,--title|run,--attempts|run,--model|run,--nodes|merge,--branch|wait,--timeout|stop,--timeout|list,-n|list,--max-count)
		# Free text: offer nothing.
		return ;;
	run,-F|run,--file)
		# A file name, or - for standard input: bash's default completion.
		return ;;
	run,--base|config,--base)
		__git_complete_refs
		return ;;
	run,--executor|run,--node)
		__gitcomp "claude opencode command"
		return ;;
	run,--on)
		__gitcomp "local slurm"
		return ;;
	run,--continue)
		__gitcomp_nl "$(__git_mullet_jobs continue)"
		return ;;
	list,--state|discard,--state)
		__gitcomp "running succeeded no_changes failed refused cancelled interrupted queued damaged"
		return ;;
	esac

	# The value of an option given as --option=value.
	case "$subcommand,$cur" in
	run,--base=*|config,--base=*)
		__git_complete_refs --cur="${cur#--base=}"
		return ;;
	run,--node=*)
		__gitcomp "claude opencode command" "" "${cur#--node=}"
		return ;;
	run,--executor=*)
		__gitcomp "claude opencode command" "" "${cur#--executor=}"
		return ;;
	run,--on=*)
		__gitcomp "local slurm" "" "${cur#--on=}"
		return ;;
	run,--continue=*)
		__gitcomp_nl "$(__git_mullet_jobs continue)" "" "${cur#--continue=}"
		return ;;
	list,--state=*|discard,--state=*)
		__gitcomp "running succeeded no_changes failed refused cancelled interrupted queued damaged" "" "${cur#--state=}"
		return ;;
	run,--*=*|merge,--branch=*|wait,--timeout=*|stop,--timeout=*|list,--max-count=*)
		return ;;
	esac

	case "$subcommand,$cur" in
	run,-*)
		__gitcomp "--message= --file= --base= --executor= --command= --title= --setup= --gate= --attempts= --model= --nodes= --node= --on= --continue= --json --dry-run --detach --include-uncommitted --quiet --help" ;;
	list,-*)
		__gitcomp "--json --state= --max-count= --help" ;;
	stop,-*)
		__gitcomp "--json --timeout= --help" ;;
	doctor,-*|show,-*)
		__gitcomp "--json --help" ;;
	log,-*)
		__gitcomp "--raw --help" ;;
	wait,-*)
		__gitcomp "--quiet --json --timeout= --help" ;;
	resume,-*)
		__gitcomp "--quiet --json --help" ;;
	shell,-*)
		__gitcomp "--record --help" ;;
	merge,-*)
		__gitcomp "--branch= --force --help" ;;
	discard,-*)
		__gitcomp "--state= --all --yes --force --help" ;;
	config,-*)
		__gitcomp "--base= --help" ;;
	diff,-*)
		# Some of the git diff options it passes through (git-mullet(1)).
		__gitcomp "--stat --name-only --name-status --numstat --shortstat --patch --color-words --word-diff --help" ;;
	help,-*)
		__gitcomp "--help" ;;
	help,*)
		__gitcomp "run list show diff log wait resume stop shell merge discard config doctor" ;;
	show,*|diff,*|log,*|wait,*|resume,*|stop,*|shell,*|merge,*|discard,*)
		__gitcomp_nl "$(__git_mullet_jobs "$subcommand")" ;;
	*)
		COMPREPLY=() ;;
	esac
}

# `git-mullet ...` typed directly: the same completion, on top of git's
# (loaded here if bash-completion has not loaded it yet).
if ! declare -F __git_complete >/dev/null 2>&1 && declare -F _completion_loader >/dev/null 2>&1; then
	_completion_loader git >/dev/null 2>&1
fi
if declare -F __git_complete >/dev/null 2>&1; then
	__git_complete git-mullet _git_mullet
fi
