#!/usr/bin/env zsh
# `allot completion zsh` in a real interactive zsh (driven through zsh/zpty): TAB completes
# commands, subcommands and flags, in a shell with no completion set-up of its own (the script
# loads compinit) and in one whose set-up already ran compinit; PATH still works afterwards.
# Usage: zsh_completion_test.zsh BIN_DIR (where the allot binary is).
emulate -L zsh
zmodload zsh/zpty || { print -u2 "zsh/zpty is missing"; exit 1; }
bin=${1:?usage: zsh_completion_test.zsh BIN_DIR}
[[ -x $bin/allot ]] || { print -u2 "no allot in $bin"; exit 1; }
home=$(mktemp -d) || exit 1
trap 'zpty -d shell 2>/dev/null; rm -rf $home' EXIT
failures=0

# Types `line`, TAB, then turns the completed line into an echo whose output (not the typed
# text, which the terminal also shows) carries both markers; prints what is between them.
completed() {
  zpty -w -n shell "$1"$'\t'
  sleep 0.3
  zpty -w -n shell $'\C-a''echo ${:-AA}BB '$'\C-e'' ${:-CC}DD'$'\n'
  local got
  # Blocks until the markers come; ctest's timeout ends a shell that never answers.
  zpty -r -m shell got '*AABB*CCDD*'
  got=${got//$'\r'/}
  [[ $got == *AABB*CCDD* ]] || { print -r -- "(no answer)"; return; }
  got=${got##*AABB }
  print -r -- "${got%% CCDD*}"
}

expect() {
  local want=$2 got
  got=$(completed "$1")
  if [[ $got == "$want" ]]; then
    print -r -- "ok: '$1' -> '$got'"
  else
    print -r -- "FAIL ($setup): '$1' completed to '$got', not '$want'"
    failures=$((failures + 1))
  fi
}

for setup in "no compinit" "compinit first"; do
  pre=""
  [[ $setup == "compinit first" ]] && pre="autoload -U compinit && compinit -u; "
  zpty shell "env -i HOME=$home TERM=dumb PATH=$bin:/usr/bin:/bin zsh -f -i"
  zpty -w shell "PS1='> '; ${pre}source <(allot completion zsh)"
  expect "allot jo" "allot job"
  expect "allot job li" "allot job list"
  expect "allot run --gpus 2 --queue" "allot run --gpus 2 --queue-anyway"
  expect "allot --server http://x host dr" "allot --server http://x host drain"
  expect "allot lease approve 7 --fo" "allot lease approve 7 --force"
  # Completion changed nothing of the shell's: commands are still found on PATH.
  expect "allot --vers" "allot --version"
  zpty -w shell 'allot --version | sed "s/^/VV/"'
  zpty -r -m shell version '*VVallot*' || { print "FAIL ($setup): allot no longer runs"; failures=$((failures + 1)); }
  zpty -d shell
done
exit $((failures > 0))
