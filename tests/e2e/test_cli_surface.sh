#!/usr/bin/env bash
# The man page and the completions cannot drift from the parser: every
# command and option `git-mullet --dump-cli-json` lists (the parser's own
# tables) must be in the man page (with the command's exit codes) and be
# offered by the bash, fish and zsh completions, each driven in its own
# shell; job ids complete with state and title where the shell shows
# descriptions, only those the command accepts.
source "$(dirname "$0")/../lib/harness.sh"

SOURCE_DIR="$(cd "$HARNESS_DIR/../.." && pwd)"
COMPLETIONS="$SOURCE_DIR/completions"
CHECKER="$HARNESS_DIR/cli_surface.py"

# The parser's commands, and a command's long options (--help aside).
commands() { git-mullet --dump-cli-json | jq -r '.commands[].name'; }
long_options() {
  git-mullet --dump-cli-json |
    jq -r --arg c "$1" '.commands[] | select(.name == $c) | .options[].names[] | select(startswith("--") and . != "--help")'
}

# bash_complete WORD...: what bash, with bash-completion and git's completion
# loaded as a login shell would, offers for the command line WORD... (the
# last word is the one being completed), one a line.
bash_complete() {
  bash --norc --noprofile -c '
    source /usr/share/bash-completion/bash_completion
    source "$0"
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    spec="$(complete -p "$1")" || exit 3
    function="$(printf "%s\n" "$spec" | sed -n "s/.* -F \([^ ]*\) .*/\1/p")"
    "$function" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}"
  ' "$COMPLETIONS/git-mullet.bash" "$@"
}

# fish_complete LINE: fish's completions for LINE ("value<TAB>description").
fish_complete() {
  fish --no-config -c "source '$COMPLETIONS/git-mullet.fish'; complete -C '$1'"
}

# zsh_complete LINE: what zsh's completion system shows for LINE (its list
# of matches, "VALUE  -- DESCRIPTION", or the line with the one match
# inserted), from an interactive zsh with compinit driven through a
# pseudo-terminal (zsh/zpty), terminal controls taken out.
zsh_complete() {
  local script="$TEST_ROOT/zsh-complete.zsh"
  cat >"$script" <<'ZSH'
setopt extendedglob
zmodload zsh/zpty
zpty -b complete zsh -f -i
# list_ambiguous off: the list is shown even when the matches share a prefix
# that zsh inserts first (two job ids starting with the same digit, 1 in 16).
zpty -w complete "PS1= PS2= PROMPT_EOL_MARK=; unsetopt zle_bracketed_paste 2>/dev/null; unsetopt list_ambiguous"
zpty -w complete "fpath=('$1' \$fpath); autoload -U compinit; compinit -u -D"
# Tab completes, shows the list, then says so: zle lists nothing while more
# input is pending, so the rest is typed only once that is seen.
# Each marker is typed split by quotes, so that only its output matches.
zpty -w complete 'complete-and-say() { zle complete-word; zle -R; print -n "<<comp""leted>>" >/dev/tty; }'
zpty -w complete "zle -N complete-and-say; bindkey '^I' complete-and-say"
zpty -w complete "zstyle ':completion:*' list-grouped false; print '<<rea''dy>>'"
zpty -r complete line '*<<ready>>*'
zpty -n -w complete "$2"$'\t'
zpty -r complete shown '*<<completed>>'
zpty -w complete $'\C-u'"print '<<do''ne>>'"
for line in "${(@f)shown}"; do
  line=${line//$'\e'\[[0-9;?]#[a-zA-Z]/}
  print -r -- "${line//[$'\r\a']/}"
done
while zpty -r complete line; do
  line=${line//$'\e'\[[0-9;?]#[a-zA-Z]/}
  line=${line//[$'\r\a']/}
  [[ $line == *'<<done>>'* ]] && break
  print -rn -- "$line"
done
zpty -d complete
ZSH
  timeout 60 zsh -f "$script" "$COMPLETIONS" "$1"
}

test_the_man_page_has_every_command_option_and_exit_code() {
  git-mullet --dump-cli-json | python3 "$CHECKER" man "$SOURCE_DIR/man/git-mullet.1" || fail "the man page drifted"
  # The control: an option taken out of a copy of the page is found missing.
  sed 's/^\\fB\\-\\-title\\fR \\fITITLE\\fR$/title/' "$SOURCE_DIR/man/git-mullet.1" >drifted.1
  if git-mullet --dump-cli-json | python3 "$CHECKER" man drifted.1 >found; then fail "the check missed a drift"; fi
  assert_eq "$(cat found)" "man: run --title is not in its section"
  # Every command documents its exit codes, in the parser.
  assert_eq "$(git-mullet --dump-cli-json | jq '[.commands[] | select(.exit_codes == {})] | length')" 0
}

test_the_zsh_completion_has_every_command_and_option() {
  git-mullet --dump-cli-json | python3 "$CHECKER" zsh "$COMPLETIONS/_git-mullet" || fail "the zsh completion drifted"
  zsh -n "$COMPLETIONS/_git-mullet" || fail "the zsh completion does not parse"
  sed "s/'--raw\[/'--rawx[/" "$COMPLETIONS/_git-mullet" >drifted
  if git-mullet --dump-cli-json | python3 "$CHECKER" zsh drifted >found; then fail "the check missed a drift"; fi
  assert_eq "$(cat found)" "zsh: log --raw is missing"
}

test_bash_offers_every_command_and_option() {
  new_repo repo
  cd repo
  local offered command option
  for program in "git mullet" "git-mullet"; do
    # shellcheck disable=SC2086
    offered="$(bash_complete $program '')"
    for command in $(commands); do
      printf '%s\n' "$offered" | grep -x "$command " >/dev/null || fail "bash: '$program ' does not offer $command: $offered"
    done
    for command in $(commands); do
      # shellcheck disable=SC2086
      offered="$(bash_complete $program "$command" --)"
      for option in $(long_options "$command"); do
        printf '%s\n' "$offered" | grep -xE -- "$option(=| )" >/dev/null ||
          fail "bash: '$program $command --' does not offer $option: $offered"
      done
    done
  done
}

test_fish_offers_every_command_and_option() {
  new_repo repo
  cd repo
  local offered command option
  offered="$(fish_complete 'git-mullet ')"
  for command in $(commands); do
    printf '%s\n' "$offered" | grep "^$command"$'\t' >/dev/null || fail "fish does not offer $command: $offered"
  done
  for command in $(commands); do
    offered="$(fish_complete "git-mullet $command --")"
    for option in $(long_options "$command"); do
      printf '%s\n' "$offered" | grep -- "^$option"$'\t' >/dev/null ||
        fail "fish: 'git-mullet $command --' does not offer $option: $offered"
    done
  done
}

test_zsh_offers_every_command_and_option() {
  new_repo repo
  cd repo
  local offered command option
  offered="$(zsh_complete 'git-mullet ')"
  for command in $(commands); do
    printf '%s\n' "$offered" | grep -E "^$command +-- " >/dev/null || fail "zsh does not offer $command: $offered"
  done
  for command in run log wait; do
    offered="$(zsh_complete "git-mullet $command --")"
    for option in $(long_options "$command"); do
      printf '%s\n' "$offered" | grep -E -- "(^|  )$option( |$)" >/dev/null ||
        fail "zsh: 'git-mullet $command --' does not offer $option: $offered"
    done
  done
}

# Three jobs: succeeded with a result, no changes, failed with a result.
three_jobs() {
  new_repo repo
  cd repo
  run_job --title "alpha change" -m task --command 'echo a >a'
  SUCCEEDED="$JOB"
  run_job --title "beta nothing" -m task --command true
  NO_CHANGES="$JOB"
  git mullet run -q --json --title "gamma broken" -m task --command 'echo g >g; exit 3' >failed.json || true
  FAILED="$(jq -r .id failed.json)"
  assert_eq "$(jq -r .state failed.json)" failed
  rm failed.json
}

test_jobs_complete_with_state_and_title_and_only_where_accepted() {
  three_jobs
  expect_exit 0 git mullet __complete-jobs show
  assert_contains "$OUT" "$SUCCEEDED"$'\t'"succeeded alpha change"
  assert_contains "$OUT" "$NO_CHANGES"$'\t'"no_changes beta nothing"
  assert_contains "$OUT" "$FAILED"$'\t'"failed gamma broken"
  expect_exit 0 git mullet __complete-jobs merge
  assert_contains "$OUT" "$SUCCEEDED"
  assert_contains "$OUT" "$FAILED"
  assert_not_contains "$OUT" "$NO_CHANGES" "jobs offered to merge"
  expect_exit 0 git mullet __complete-jobs resume
  assert_eq "$(printf '%s\n' "$OUT" | cut -f1)" "$FAILED" "jobs offered to resume"
  # Outside a repository: nothing, and no error in the command line.
  (cd "$TEST_ROOT" && GIT_CEILING_DIRECTORIES="$TEST_ROOT" expect_exit 0 git mullet __complete-jobs show &&
    assert_eq "$OUT$ERR" "")

  # In each shell.
  local offered
  offered="$(bash_complete git mullet resume '')"
  assert_eq "$offered" "$FAILED " "bash: jobs offered to resume"
  offered="$(bash_complete git mullet merge '')"
  assert_contains "$offered" "$SUCCEEDED"
  assert_not_contains "$offered" "$NO_CHANGES" "bash: jobs offered to merge"
  offered="$(fish_complete 'git-mullet merge ')"
  assert_contains "$offered" "$SUCCEEDED"$'\t'"succeeded alpha change"
  assert_not_contains "$offered" "$NO_CHANGES" "fish: jobs offered to merge"
  offered="$(fish_complete 'git-mullet resume ')"
  assert_contains "$offered" "$FAILED"$'\t'"failed gamma broken"
  assert_not_contains "$offered" "$SUCCEEDED" "fish: jobs offered to resume"
  offered="$(zsh_complete 'git-mullet show ')"
  assert_matches "$offered" "$SUCCEEDED +-- succeeded alpha change"
  assert_matches "$offered" "$NO_CHANGES +-- no_changes beta nothing"
  assert_matches "$offered" "$FAILED +-- failed gamma broken"
  offered="$(zsh_complete 'git-mullet merge ')"
  assert_matches "$offered" "$SUCCEEDED +-- succeeded alpha change"
  assert_not_contains "$offered" "$NO_CHANGES" "zsh: jobs offered to merge"
  # The one job resume accepts is put on the line.
  offered="$(zsh_complete 'git-mullet resume ')"
  assert_contains "$offered" "git-mullet resume $FAILED"
  assert_not_contains "$offered" "$SUCCEEDED" "zsh: jobs offered to resume"
}

run_tests
