#!/bin/sh
# remote_runner.py for a device with an ExecuTorch executor_runner but no Python (a phone, a
# board): POSIX sh and the utilities of coreutils, busybox and Android's toybox. It is run.sh
# in a bundle that `layoutbench pack RESULTS OUT --bundle` writes, and runs each program of the
# bundle as remote_runner.py does: --processes runner processes of --warmup + --iterations
# executions, the runner's flags the same, the ETDumps (and the outputs of a program packed with
# its weights) named and placed as import-remote reads them, under OUT/programs/, and
# OUT/remote.json (`layoutbench import-remote RESULTS OUT`).
#
#   sh run.sh [RUNNER] [--out DIR] [--warmup 1] [--iterations 20] [--processes 3] [--repeats 3]
#             [--device NAME] [--limits maxImageDimension2D=N,maxImageDimension3D=N,maxStorageBufferRange=N]
#             [--only PROGRAM]
#
# RUNNER: the executor_runner (default: the one packed beside this script). DIR: where the
# results go (default: results, beside this script). NAME and the limits: the Vulkan device
# and what it allows, where no vulkaninfo can say (vulkaninfo's own, or the device's page on
# gpuinfo.org, has them). PROGRAM: one name of programs.list, run alone (a run over adb runs
# and brings back one program at a time). What sh cannot measure (peak memory without a `time -v`, the
# device, its limits) is null in remote.json, with the reason under "unknown".
#
# Its arithmetic is on small numbers only: mksh (Android's /system/bin/sh) computes in 32 bits,
# so the clock's nanoseconds and the kilobytes of peak memory go into remote.json as read, for
# import-remote to compute with, and pack wrote every position in a program beforehand.

usage="usage: sh run.sh [RUNNER] [--out DIR] [--warmup N] [--iterations N] [--processes N] [--repeats N] [--device NAME] [--limits NAME=N,...] [--only PROGRAM]"
here=$(cd "$(dirname "$0")" && pwd)
fail() { printf 'run.sh: error: %s\n' "$1" >&2; exit 2; }
absolute() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$(pwd)" "$1" ;; esac; }

runner=$here/executor_runner out=$here/results warmup=1 iterations=20 processes=3 repeats=3 device='' limits='' only=''
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) echo "$usage"; exit 0 ;;
        --out|--warmup|--iterations|--processes|--repeats|--device|--limits|--only)
            [ $# -ge 2 ] || fail "$1 needs a value; $usage"
            name=${1#--}; eval "$name=\$2"; shift 2 ;;
        --out=*|--warmup=*|--iterations=*|--processes=*|--repeats=*|--device=*|--limits=*|--only=*)
            name=${1%%=*}; name=${name#--}; eval "$name=\${1#*=}"; shift ;;
        -*) fail "unknown option $1; $usage" ;;
        *) runner=$1; shift ;;
    esac
done
value=''
for setting in warmup:0 iterations:1 processes:1 repeats:1; do
    eval "value=\$${setting%:*}"
    case $value in ''|*[!0-9]*|??????????*) fail "--${setting%:*} takes a whole number of at most 9 digits, not '$value'" ;; esac
    [ "$value" -ge "${setting#*:}" ] || fail "--${setting%:*} takes a whole number >= ${setting#*:}, not $value"
done
runner=$(absolute "$runner") out=$(absolute "$out")
{ [ -f "$runner" ] && [ -x "$runner" ]; } || fail "$runner is not an executable file: name the executor_runner"
[ -f "$here/programs.list" ] || fail "$here holds no programs.list: run the run.sh of a bundle from its directory"
[ "$out" != "$here" ] || fail "--out must be another directory than the bundle's"
total=$(grep -c . "$here/programs.list")
if [ -n "$only" ]; then
    listed=''
    while read -r count name; do [ "$name" != "$only" ] || listed=yes; done < "$here/programs.list"
    [ -n "$listed" ] || fail "--only $only: no such program in $here/programs.list"
    total=1
fi
[ "$(printf ab | head -c 1 2>/dev/null)" = a ] || fail "this system's head has no -c (bytes), which refilling needs"

# The outputs of an earlier run into DIR go first: import-remote would read a stale ETDump.
work=$out/.work
rm -rf "$out/programs" "$out/remote.json" "$work"
mkdir -p "$work" || fail "cannot write $out"
trap 'rm -rf "$work"; exit 130' INT
trap 'rm -rf "$work"; exit 143' TERM

json() {  # $1 as a JSON string: control characters dropped, backslashes and quotes escaped
    printf '"%s"' "$(printf '%s' "$1" | tr -d '[:cntrl:]' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"
}

# The limits "maxImageDimension2D=N,..." as a JSON object, in the order remote_runner.py writes
# them (costmodel/device_limits.py's LIMITS).
limits_object() {
    given_maxImageDimension2D='' given_maxImageDimension3D='' given_maxStorageBufferRange=''
    rest=$1,
    while [ -n "$rest" ]; do
        item=${rest%%,*} rest=${rest#*,}
        [ -n "$item" ] || continue
        limit=${item%%=*} value=${item#*=}
        case $limit in maxImageDimension2D|maxImageDimension3D|maxStorageBufferRange) ;;
            *) fail "--limits: unknown device limit '$limit'; known: maxImageDimension2D, maxImageDimension3D, maxStorageBufferRange" ;;
        esac
        case $value in ''|0*|*[!0-9]*) fail "--limits: expected NAME=NUMBER (a whole number > 0), not '$item'" ;; esac
        eval "given_$limit=\$value"
    done
    object=''
    for limit in maxImageDimension2D maxImageDimension3D maxStorageBufferRange; do
        eval "value=\$given_$limit"
        [ -z "$value" ] || object="${object:+$object, }\"$limit\": $value"
    done
    printf '{%s}' "$object"
}

# The device vulkaninfo printed last (its limits read since), against the best so far: the one
# named $1, else $ETVK_DEVICE_INDEX, else the first of the highest kind.
consider() {
    [ -n "$current" ] && [ -z "$picked" ] || return 0
    if [ -n "$1" ]; then
        [ "$current" = "$1" ] && picked=yes chosen="$l2 $l3 $lb $current"
    elif [ "$index" = "${ETVK_DEVICE_INDEX:-}" ]; then picked=yes chosen="$l2 $l3 $lb $current"
    elif [ "$current_kind" -gt "$best" ]; then best=$current_kind chosen="$l2 $l3 $lb $current"
    fi
    return 0
}

# The device ET-VK picks (backends/vulkan/runtime/vk_api/Runtime.cpp: $ETVK_DEVICE_INDEX, else
# the first of the highest kind, discrete over integrated, virtual, other, CPU), or the one
# named $1, with its limits, from vulkaninfo's output: "2D 3D BUFFER NAME", a limit not printed -.
pick_device() {
    index=-1 best=-1 kind=0 current_kind=0 chosen='' current='' picked='' l2=- l3=- lb=-
    while IFS= read -r line; do
        case $line in
            *deviceType*=*)
                case $line in
                    *DISCRETE_GPU) kind=5 ;; *INTEGRATED_GPU) kind=4 ;; *VIRTUAL_GPU) kind=3 ;; *CPU) kind=1 ;;
                    *) kind=2 ;;
                esac ;;
            *deviceName*=*)
                consider "$1"
                index=$((index + 1)) current=${line#*= } current_kind=$kind l2=- l3=- lb=- ;;
            *maxImageDimension2D*=*) l2=$(echo ${line#*=}) ;;
            *maxImageDimension3D*=*) l3=$(echo ${line#*=}) ;;
            *maxStorageBufferRange*=*) lb=$(echo ${line#*=}) ;;
        esac
    done
    consider "$1"
    printf '%s' "$chosen"
}
unknown=''
limits_json=null
[ -z "$limits" ] || limits_json=$(limits_object "$limits") || exit 2
if command -v vulkaninfo >/dev/null 2>&1 && { [ -z "$device" ] || [ -z "$limits" ]; }; then
    read -r l2 l3 lb found <<PICKED
$(vulkaninfo 2>/dev/null | pick_device "$device")
PICKED
    [ -n "$device" ] || device=$found
    if [ -z "$limits" ] && [ -n "$found" ]; then
        read_limits=''
        for pair in maxImageDimension2D=$l2 maxImageDimension3D=$l3 maxStorageBufferRange=$lb; do
            case ${pair#*=} in ''|*[!0-9]*) ;; *) read_limits="${read_limits:+$read_limits,}$pair" ;; esac
        done
        [ -z "$read_limits" ] || limits_json=$(limits_object "$read_limits")
    fi
fi
if [ -n "$device" ]; then device_json=$(json "$device")
else
    device_json=null
    unknown="\"device\": \"no --device given, and no vulkaninfo here named one; import-remote --device names it\""
fi
if [ "$limits_json" = null ]; then
    unknown="${unknown:+$unknown, }\"limits\": \"no --limits given, and no vulkaninfo here read the device's; import-remote --limits states them\""
fi

# Peak memory: the runner's maximum resident set, as wait4 reports it, through a time -v (GNU,
# busybox and toybox each have one; sh has no wait4).
if env time -v true >"$work/probe" 2>&1 && grep -q -e 'Maximum resident set size' -e 'Max RSS' "$work/probe"; then
    timer=yes
else
    timer=''
    unknown="${unknown:+$unknown, }\"peak_rss_bytes\": \"no time -v here (GNU time, busybox or toybox)\""
fi
# Wall clock in nanoseconds, for a runner that writes no ETDump: date +%N is no POSIX, but
# coreutils, busybox and toybox have it.
now=$(date +%s%N 2>/dev/null)
case $now in ''|*[!0-9]*) clock='' ;; *) clock=yes ;; esac
if command -v sha256sum >/dev/null 2>&1; then digest=$(sha256sum "$runner" | cut -c1-16)
else digest=cksum-$(cksum < "$runner" | tr ' ' '-')
fi

# $1 bytes of weights of the type $2: its block from the bundle repeated, as weightless.refill
# fills a region, 16 blocks at a time (the loop ends at the first cat whose write head no
# longer reads).
fill() {
    fill_run=$work/$2.run
    if [ ! -f "$fill_run" ]; then
        for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do cat "$here/fill/$2.bin"; done > "$fill_run"
    fi
    while cat "$fill_run"; do :; done | head -c "$1"
}

# The program $1 (programs/<model>/<strategy>.pte) with its weights, at $2: its .splices says
# "START LENGTH SIZE TYPE" a line (LENGTH bytes of the cut from its byte START, then SIZE bytes
# of weights of TYPE), the last line "START LENGTH" (the cut's rest), as numbers no sh adds.
# Sets $filled where any weights were (random ones: its outputs are no eager run's).
refill() {
    cut=$here/${1%.pte}.cut filled=''
    while read -r start length size type; do
        [ "$length" = 0 ] || tail -c +"$start" "$cut" | head -c "$length"
        [ -z "$type" ] || { fill "$size" "$type"; filled=yes; }
    done < "$here/${1%.pte}.splices" > "$2"
}

# One runner process of $1 executions in $workdir: sets $readings, the clock's before and after
# ("START, END" in ns, where there is a clock), and adds its peak resident kilobytes to $rss; on
# a non-zero exit, $failure says so, with the last line the runner wrote.
execute() {
    set -- "$runner" "--model_path=$runnable" "--inputs=$inputs" "--num_executions=$1" \
        "--output_file=$workdir/output" "--print_output=none"
    start=$(if [ "$clock" ]; then date +%s%N; fi)
    if [ "$timer" ]; then
        (cd "$workdir" && env time -v sh -c 'exec "$@" 2>stderr.txt' sh "$@" </dev/null >/dev/null 2>rusage.txt)
    else
        (cd "$workdir" && exec "$@" </dev/null >/dev/null 2>stderr.txt)
    fi
    code=$?
    readings="$start, $(if [ "$clock" ]; then date +%s%N; fi)"
    if [ "$timer" ]; then
        kib=$(sed -n -e 's/.*Maximum resident set size[^:]*: *\([0-9]*\).*/\1/p' \
            -e 's/.*Max RSS[^:]*: *\([0-9]*\).*/\1/p' "$workdir/rusage.txt")
        [ -z "$kib" ] || rss="${rss:+$rss, }$kib"
    fi
    [ "$code" -eq 0 ] && return 0
    # A signal as Python reports it (-11), as remote_runner.py's message has it.
    [ "$code" -gt 128 ] && code=-$((code - 128))
    last=$(grep -v '^[[:space:]]*$' "$workdir/stderr.txt" | tail -n 1 | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    failure="executor_runner on $name exited with $code: ${last:-no message}"
    return 1
}

# remote_runner.run_timed: $processes processes, each one's ETDump kept; a runner that writes
# none is timed from outside instead, the first process having been its warm-up: the clock's
# readings around 1 and around iterations + 1 executions, $repeats times (import-remote takes the
# differences). Sets $entry, the program's remote.json entry.
run_program() {
    etdumps=0 rss=''
    while [ "$etdumps" -lt "$processes" ]; do
        rm -f "$workdir/model.etdump"
        execute $((warmup + iterations)) || return 1
        [ -s "$workdir/model.etdump" ] || break
        etdumps=$((etdumps + 1))
        mv "$workdir/model.etdump" "$workdir/process-$etdumps.etdump"
    done
    if [ "$etdumps" -gt 0 ]; then
        keep_outputs
        entry="{\"latencies_ms\": null, \"rss_kib\": $(rss_json), \"etdump\": true, \"processes\": $etdumps, \"outputs\": $outputs}"
        return 0
    fi
    if [ -z "$clock" ]; then
        failure="the runner wrote no ETDump (built without the event tracer) and this date has no %N to time it from outside: build it with -DEXECUTORCH_ENABLE_EVENT_TRACER=ON"
        return 1
    fi
    clocks='' repeat=0
    while [ "$repeat" -lt "$repeats" ]; do
        execute 1 || return 1
        one=$readings
        execute $((iterations + 1)) || return 1
        clocks="${clocks:+$clocks, }[$one, $readings]" repeat=$((repeat + 1))
    done
    keep_outputs
    entry="{\"latencies_ms\": null, \"clocks_ns\": [$clocks], \"rss_kib\": $(rss_json), \"etdump\": false, \"processes\": 1, \"outputs\": $outputs}"
}

# The last execution's tensor outputs where remote_runner.py's output_paths places them, numbered
# from 0 in the runner's order (it numbers them by their place among all outputs, skipping those
# that are no tensors); sets $outputs, their count, or null where the program ran on random
# weights (its outputs are no eager run's).
keep_outputs() {
    outputs=null
    [ -z "$filled" ] || return 0
    outputs=0
    for number in $(ls "$workdir" | sed -n 's/^output-\([0-9][0-9]*\)\.bin$/\1/p' | sort -n); do
        mkdir -p "$out/${name%.pte}.outputs"
        mv "$workdir/output-$number.bin" "$out/${name%.pte}.outputs/output-$outputs.bin"
        outputs=$((outputs + 1))
    done
}

# Every runner process's peak resident kilobytes, as time -v read them, or null without one.
rss_json() { if [ "$timer" ]; then printf '[%s]' "$rss"; else printf null; fi; }

index=0 entries=''
while read -r count name; do
    [ -z "$only" ] || [ "$name" = "$only" ] || continue
    index=$((index + 1)) workdir=$work/$index
    mkdir -p "$workdir"
    read -r start length size type < "$here/${name%.pte}.splices"
    if [ -z "$size" ]; then  # nothing to splice in (packed with its weights): the cut is the program
        runnable=$here/${name%.pte}.cut filled=''
    else
        runnable=$workdir/$(basename "$name")
        refill "$name" "$runnable"
    fi
    inputs='' input=0
    while [ "$input" -lt "$count" ]; do
        inputs="${inputs:+$inputs,}$here/${name%.pte}.inputs/input-$input.bin" input=$((input + 1))
    done
    if run_program; then
        first=$out/${name%.pte}
        mkdir -p "$(dirname "$first")"
        process=1
        while [ "$process" -le "$etdumps" ]; do
            if [ "$process" = 1 ]; then place=$first.etdump; else place=$first.$process.etdump; fi
            mv "$workdir/process-$process.etdump" "$place"
            process=$((process + 1))
        done
        if [ "$etdumps" -gt 0 ]; then timing="$etdumps ETDumps written"; else timing="timed by wall clock"; fi
        printf 'run.sh: [%s/%s] %s: %s\n' "$index" "$total" "$name" "$timing" >&2
    else
        entry="{\"error\": $(json "$failure")}"
        printf 'run.sh: %s: %s\n' "$name" "$failure" >&2
    fi
    entries="${entries:+$entries,
}  $(json "$name"): $entry"
    rm -rf "$workdir"
done < "$here/programs.list"

cat > "$out/remote.json.part" <<EOF
{"device": $device_json, "limits": $limits_json, "machine": $(json "$(uname -n)"), "runner": $(json "$runner"),
 "runner_digest": "$digest", "made_by": "run.sh",
 "settings": {"warmup": $warmup, "iterations": $iterations, "repeats": $repeats, "processes": $processes},
 "unknown": {$unknown},
 "programs": {
$entries
 }}
EOF
mv "$out/remote.json.part" "$out/remote.json"
rm -rf "$work"
printf 'run.sh: %s programs run; bring %s back whole and import it: layoutbench import-remote RESULTS DIR --out DIR2\n' \
    "$index" "$out" >&2
