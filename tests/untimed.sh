# untimed.sh - sourced by the tests that compare the reports of separate executions of the same
# configurations byte for byte (t_launch.sh, t_slurm.sh): `untimed FILE` prints the report without
# what the machine's speed at the time makes differ, compare's median step time (the text's and
# Markdown's table row, the JSON figure median_step_time_ms) and the Speed items it gives rise to
# (text, Markdown, JSON's recommendation.speed and its items), with runs of spaces squeezed (the
# table's columns are as wide as their widest cell).
untimed() {
    sed -e 's/,"median_step_time_ms":{[^}]*}//g' \
        -e 's/"speed":\[[^]]*\]/"speed":[]/g' \
        -e 's/,{"id":"speed_faster"[^}]*}//g' "$1" |
        awk '/^median step time / || /^\| median step time \|/ { next }
             /^Speed / { skip = 1; next }
             /^### Speed$/ { skip = 2; next }
             skip == 1 && /^ / { next }
             skip == 2 && (/^$/ || /^- /) { next }
             { skip = 0; print }' | tr -s ' '
}
