#!/bin/sh
# allot-sim replay on bad input: a non-zero exit and exactly one line on stderr, naming the problem.
# Usage: replay_cli_test.sh PATH_TO_ALLOT_SIM
sim="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\n' > "$dir/nodes.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\np0,1000,1024,1,500,BE,0,20,10\n' > "$dir/pods.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n' > "$dir/untimed.csv"
fail=0
expect_error() {  # WANT_TEXT ARGS...
  want="$1"
  shift
  "$sim" replay "$@" > "$dir/out" 2> "$dir/err"
  rc=$?
  lines=$(wc -l < "$dir/err")
  if [ "$rc" -eq 0 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$want" "$dir/err"; then
    echo "FAIL: replay $* -> exit $rc, $lines stderr lines, want one line with '$want':"
    cat "$dir/err"
    fail=1
  fi
}
expect_error "cannot open" --nodes "$dir/missing.csv" --pods "$dir/pods.csv"
expect_error "cannot open" --nodes "$dir/nodes.csv" --pods "$dir/missing.csv"
expect_error "--bogus" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --bogus
expect_error "teams" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --teams 0
expect_error "teams" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --teams x
expect_error "guarantee-share" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --guarantee-share 2
expect_error "worstfit" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --policy fgd,worstfit
expect_error "no creation_time" --nodes "$dir/nodes.csv" --pods "$dir/untimed.csv"
# And good input works, in both formats.
"$sim" replay --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --policy all > "$dir/out" 2>&1 ||
  { echo "FAIL: good input"; cat "$dir/out"; fail=1; }
"$sim" replay --nodes "$dir/nodes.csv" --pods "$dir/untimed.csv" --times "$dir/pods.csv" -o json > "$dir/out" 2>&1 &&
  grep -q '"jain"' "$dir/out" || { echo "FAIL: json"; cat "$dir/out"; fail=1; }
exit $fail
