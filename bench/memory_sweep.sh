#!/bin/sh
# memory_sweep.sh OCTO MODEL [LLAMA_CLI] — octo (zero-config) and, when given, llama.cpp's llama-cli on the
# same GGUF file under memory caps from 300 to 1400 MiB in 100 MiB steps, the file's page cache dropped before
# each run (../shared/tools/capped.sh: a fresh memory cgroup per run). The two alternate at each cap. Prints
# one row per cap: each one's exit code (137: killed by the kernel; 1: refused; the worst of the reps), decode
# tokens/s (the median of SWEEP_REPS runs, default 1, octo and llama-cli alternated) and peak MiB (the highest).
# docs/adaptation.md has the figures and the command. Needs root (cgroups). N tokens: SWEEP_N (default 64);
# other caps: SWEEP_CAPS="600 700".
set -u
octo=$1 model=$2 llama=${3:-}
n=${SWEEP_N:-64}
reps=${SWEEP_REPS:-1}
capped=$(dirname "$0")/../../shared/tools/capped.sh
[ -x "$capped" ] || capped=/work/shared/tools/capped.sh
prompt="Once upon a time"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

octo_run() { # cap -> "rc tok/s peak"
    "$capped" "$1" "$model" -- "$octo" run -n "$n" --temp 0 --stats --json -p "$prompt" "$model" \
        >"$tmp/o" 2>"$tmp/e"
    rc=$(sed -n 's/^rc=\([0-9]*\).*/\1/p' "$tmp/o")
    peak=$(sed -n 's/.*peak_mib=\([0-9]*\).*/\1/p' "$tmp/o")
    tps=$(grep -o '"decode_tokens_per_s": [0-9.]*' "$tmp/e" | tail -1 | sed 's/.*: //')
    echo "${rc:-?} ${tps:--} ${peak:-?}"
}

llama_run() {
    "$capped" "$1" "$model" -- "$llama" -m "$model" -p "$prompt" -n "$n" -no-cnv --temp 0 -t 2 \
        >"$tmp/o" 2>"$tmp/e"
    rc=$(sed -n 's/^rc=\([0-9]*\).*/\1/p' "$tmp/o")
    peak=$(sed -n 's/.*peak_mib=\([0-9]*\).*/\1/p' "$tmp/o")
    tps=$(grep ' eval time' "$tmp/e" | grep -v prompt | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
    echo "${rc:-?} ${tps:--} ${peak:-?}"
}

median() { tr ' ' '\n' | grep -v '^-*$' | sort -g | awk '{v[NR]=$1} END {if (!NR) print "-"; else if (NR%2) print v[(NR+1)/2]; else printf "%.2f\n", (v[NR/2]+v[NR/2+1])/2}'; }
worst() { tr ' ' '\n' | grep -v '^$' | sort -n | tail -1; }  # an rc other than 0 in any rep shows

printf '%-8s %-6s %-10s %-9s %-6s %-10s %-9s\n' cap_mib octo_rc octo_tok/s octo_peak llama_rc llama_tok/s llama_peak
for cap in ${SWEEP_CAPS:-300 400 500 600 700 800 900 1000 1100 1200 1300 1400}; do
    o_rc= o_tps= o_peak= l_rc= l_tps= l_peak=
    r=0
    while [ $r -lt "$reps" ]; do
        set -- $(octo_run $cap)
        o_rc="$o_rc $1" o_tps="$o_tps $2" o_peak="$o_peak $3"
        if [ -n "$llama" ]; then set -- $(llama_run $cap); else set -- - - -; fi
        l_rc="$l_rc $1" l_tps="$l_tps $2" l_peak="$l_peak $3"
        r=$((r + 1))
    done
    printf '%-8s %-6s %-10s %-9s %-6s %-10s %-9s\n' "$cap" "$(echo $o_rc | worst)" "$(echo $o_tps | median)" \
        "$(echo $o_peak | worst)" "$(echo $l_rc | worst)" "$(echo $l_tps | median)" "$(echo $l_peak | worst)"
done
