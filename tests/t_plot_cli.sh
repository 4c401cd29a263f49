#!/bin/sh
# t_plot_cli.sh - `ampdiag plot` end to end on real runs made here (fp32, fp16 and bf16 mlp runs;
# an fp16 run on unnormalised inputs whose every step is skipped; a bf16 transformer with more
# layers than one chart shows) and on the reference traces in traces/ where present: every chart
# drawn, gnuplot silent on stderr, each file a valid PNG / SVG of the size the chart list says;
# the data behind the markers agrees with the trace; gnuplot missing -> exit 3 with the data and
# scripts written (and draw-all.sh then draws them); bad input -> exit 2 naming the file.
# TAP output.

srcdir=${srcdir:-.}
AMPDIAG_PLOTS_DIR=$srcdir/plots
export AMPDIAG_PLOTS_DIR
ampdiag=./ampdiag
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_plot_sh.XXXXXX") || { echo "Bail out! mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { # ok STATUS DESCRIPTION
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
diag() { echo "# $*"; }

# bytes FILE OFFSET COUNT -> the bytes as unsigned decimals, one line
bytes() { od -An -tu1 -j "$2" -N "$3" "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }

# png_ok FILE W H: PNG signature, IHDR of W x H, file ends with the IEND chunk
png_ok() {
    [ -s "$1" ] || return 1
    [ "$(bytes "$1" 0 8)" = "137 80 78 71 13 10 26 10" ] || return 1
    [ "$(bytes "$1" 12 4)" = "73 72 68 82" ] || return 1
    set -- "$1" "$2" "$3" $(bytes "$1" 16 8)
    [ $(($4 * 16777216 + $5 * 65536 + $6 * 256 + $7)) -eq "$2" ] || return 1
    [ $(($8 * 16777216 + $9 * 65536 + ${10} * 256 + ${11})) -eq "$3" ] || return 1
    size=$(wc -c < "$1")
    [ "$(bytes "$1" $((size - 8)) 8)" = "73 69 78 68 174 66 96 130" ]
}

# svg_ok FILE W H: an XML document whose root is <svg width="W" height="H" ...>...</svg>
svg_ok() {
    [ -s "$1" ] || return 1
    head -c 5 "$1" | grep -q '^<?xml' || return 1
    tr '\n' ' ' < "$1" | grep -q "<svg *width=\"$2\" height=\"$3\"" || return 1
    tail -c 200 "$1" | grep -q '</svg>' || return 1
    if command -v xmllint > /dev/null 2>&1; then xmllint --noout "$1" 2> /dev/null || return 1; fi
}

# size_of NAME: the pixel size each chart kind is drawn at (plot.c)
size_of() {
    case $1 in
    loss.* | loss-scale.* | grad-norm.*) echo "1200 650" ;;
    layer-ranges-* | *-heatmap-*) echo "1200 900" ;;
    exponent-histogram-*) echo "1200 800" ;;
    *) echo "0 0" ;;
    esac
}

# check_charts DIR FORMAT STDOUT STDERR: every chart listed on stdout is valid, nothing on stderr,
# no gnuplot log left. Prints the number of charts on stdout, what is wrong as TAP comments on
# stderr (the test's log).
check_charts() {
    bad=0
    count=0
    for f in $(sed -n "s|^$1/\([^ ]*\.$2\)\$|\1|p" "$3"); do
        count=$((count + 1))
        set -- "$1" "$2" "$3" "$4" $(size_of "$f")
        if [ "$2" = png ]; then png_ok "$1/$f" "$5" "$6" || { diag "$f: not a $5x$6 PNG" >&2; bad=1; }
        else svg_ok "$1/$f" "$5" "$6" || { diag "$f: not a $5x$6 SVG" >&2; bad=1; }; fi
    done
    if [ -s "$4" ]; then diag "stderr:" >&2; sed 's/^/#   /' "$4" >&2; bad=1; fi
    if ls "$1"/*.log > /dev/null 2>&1; then diag "gnuplot logs left: $(ls "$1"/*.log)" >&2; bad=1; fi
    echo "$count"
    return $bad
}

have_gnuplot=0
command -v gnuplot > /dev/null 2>&1 && have_gnuplot=1

# ------------------------------------------------------------------ traces
for p in fp32 fp16 bf16; do
    $ampdiag run --precision $p --steps 60 --hist-every 20 --eval-every 20 --trace-every 1 --progress none \
        -o "$tmp/$p.h5" > /dev/null 2> "$tmp/run.err" || { echo "Bail out! ampdiag run $p failed"; cat "$tmp/run.err"; exit 1; }
done
$ampdiag run --precision fp16 --data synthetic:blobs-raw --steps 30 --hist-every 10 --trace-every 1 --progress none \
    -o "$tmp/raw16.h5" > /dev/null 2> "$tmp/run.err" || { echo "Bail out! ampdiag run raw16 failed"; exit 1; }
$ampdiag run --precision bf16 --model transformer --steps 8 --hist-every 4 --eval-every 4 --trace-every 1 \
    --progress none -o "$tmp/tr.h5" > /dev/null 2> "$tmp/run.err" || { echo "Bail out! ampdiag run transformer failed"; exit 1; }

# ------------------------------------------------------------------ three runs, PNG and SVG
if [ $have_gnuplot = 1 ]; then
    $ampdiag plot "$tmp/fp32.h5" "$tmp/fp16.h5" "$tmp/bf16.h5" -o "$tmp/png" --clip 1.5 \
        > "$tmp/out" 2> "$tmp/err"
    ok $? "plot fp32 fp16 bf16 --format png exits 0"
    c=$(check_charts "$tmp/png" png "$tmp/out" "$tmp/err")
    ok $? "png: $c charts, each a valid PNG of its size, gnuplot silent"
    want="loss.png loss-scale.png grad-norm.png layer-ranges-activation.png
layer-ranges-activation_grad.png layer-ranges-weight_grad.png fp16-heatmap-fp32.png
fp16-heatmap-fp16.png fp16-heatmap-bf16.png"
    missing=
    for f in $want; do [ -f "$tmp/png/$f" ] || missing="$missing $f"; done
    nh=$(ls "$tmp/png"/exponent-histogram-fp32-*.png "$tmp/png"/exponent-histogram-fp16-*.png \
        "$tmp/png"/exponent-histogram-bf16-*.png 2> /dev/null | wc -l)
    [ -z "$missing" ] && [ "$nh" -eq 3 ] && [ "$c" -eq 12 ]
    ok $? "png: the 12 charts named by what they show (missing:${missing:- none}; $nh histograms)"
    grep -q "clip value 1.5" "$tmp/png/grad-norm.gp" &&
        [ "$(sed -n '/^[0-9]/p' "$tmp/png/grad-norm-clip.dat" | awk '{print $2}' | sort -u)" = 1.5 ]
    ok $? "--clip 1.5 is drawn on grad-norm"
    rows=$(awk 'BEGIN{b=0} /^$/{e++; if(e==2)b++; next} {e=0} !/^#/ && b==1' "$tmp/png/loss.dat" | wc -l)
    [ "$rows" -eq 60 ]
    ok $? "loss.dat holds the 60 steps of the fp16 run ($rows)"

    $ampdiag plot "$tmp/fp32.h5" "$tmp/fp16.h5" "$tmp/bf16.h5" -o "$tmp/svg" --format svg \
        > "$tmp/out" 2> "$tmp/err"
    ok $? "plot --format svg exits 0"
    c=$(check_charts "$tmp/svg" svg "$tmp/out" "$tmp/err")
    ok $? "svg: $c charts, each a well-formed SVG of its size, gnuplot silent"
    [ "$c" -eq 12 ]
    ok $? "svg: 12 charts"
else
    for i in 1 2 3 4 5 6 7 8; do skip "gnuplot not installed"; done
fi

# ------------------------------------------------------------------ skipped steps, backoffs
if [ $have_gnuplot = 1 ]; then
    $ampdiag plot "$tmp/raw16.h5" -o "$tmp/raw" > "$tmp/out" 2> "$tmp/err"
    ok $? "plot of an fp16 run skipping every step exits 0"
    c=$(check_charts "$tmp/raw" png "$tmp/out" "$tmp/err")
    ok $? "raw16: $c charts valid, gnuplot silent"
    skipped=$($ampdiag info "$tmp/raw16.h5" | sed -n 's/^  skipped steps *\([0-9]*\).*/\1/p')
    marks=$(awk 'BEGIN{b=0} /^$/{e++; if(e==2)b++; next} {e=0} !/^#/ && b==0 && $1!="NaN"' "$tmp/raw/loss-marks.dat" | wc -l)
    backoffs=$(awk 'BEGIN{b=0} /^$/{e++; if(e==2)b++; next} {e=0} !/^#/ && b==0 && $1!="NaN"' "$tmp/raw/loss-scale-marks.dat" | wc -l)
    [ -n "$skipped" ] && [ "$skipped" -gt 0 ] && [ "$marks" -eq "$skipped" ] && [ "$backoffs" -eq "$skipped" ]
    ok $? "skipped steps marked on loss ($marks) and backoffs on loss-scale ($backoffs) = info's $skipped"
    grep -q "skipped steps ($skipped)" "$tmp/out"
    ok $? "the loss chart's description counts them"
else
    for i in 1 2 3 4; do skip "gnuplot not installed"; done
fi

# ------------------------------------------------------------------ many layers, options
if [ $have_gnuplot = 1 ]; then
    $ampdiag plot "$tmp/tr.h5" -o "$tmp/tr" > "$tmp/out" 2> "$tmp/err"
    ok $? "plot of a transformer run exits 0"
    c=$(check_charts "$tmp/tr" png "$tmp/out" "$tmp/err")
    ok $? "transformer: $c charts valid, gnuplot silent"
    grep -q "^npanels = 12" "$tmp/tr/layer-ranges-activation.gp" &&
        grep -q "12 of [0-9]* layers" "$tmp/tr/layer-ranges-activation.gp"
    ok $? "more layers than fit: 12 panels, and the chart says which"
    $ampdiag plot "$tmp/tr.h5" -o "$tmp/tr2" --layers embed,lm_head --hist-steps 3 > "$tmp/out" 2> "$tmp/err"
    ok $? "--layers embed,lm_head --hist-steps 3 exits 0"
    [ -f "$tmp/tr2/exponent-histogram-bf16-embed.png" ] && [ -f "$tmp/tr2/exponent-histogram-bf16-lm_head.png" ] &&
        grep -q "^npanels = 2" "$tmp/tr2/layer-ranges-activation.gp" &&
        grep -q "^nsteps = 1" "$tmp/tr2/exponent-histogram-bf16-embed.gp" &&
        grep -q "'step 4 (" "$tmp/tr2/exponent-histogram-bf16-embed.gp"
    ok $? "... 2 panels, histograms of both layers at step 4, the recorded one nearest to 3"
else
    for i in 1 2 3 4 5; do skip "gnuplot not installed"; done
fi

# ------------------------------------------------------------------ block-scaled what-if (/quant)
# the runs count mxfp8@row and nvfp4@row on their histogram steps (run's default --whatif)
if [ $have_gnuplot = 1 ]; then
    $ampdiag plot "$tmp/fp32.h5" -o "$tmp/quant" --quant nvfp4,mxfp8-e4m3:floor@row > "$tmp/out" 2> "$tmp/err"
    ok $? "--quant nvfp4,mxfp8-e4m3:floor@row exits 0"
    c=$(check_charts "$tmp/quant" png "$tmp/out" "$tmp/err")
    ok $? "quant: $c charts valid, gnuplot silent"
    [ -f "$tmp/quant/quant-heatmap-nvfp4-e4m3-row-fp32.png" ] &&
        [ -f "$tmp/quant/quant-heatmap-mxfp8-e4m3-floor-row-fp32.png" ] &&
        grep -q "^metric = 0" "$tmp/quant/quant-heatmap-nvfp4-e4m3-row-fp32.gp" &&
        grep -q "^npanels = 4" "$tmp/quant/quant-heatmap-nvfp4-e4m3-row-fp32.gp" &&
        grep -q "^ncols = 3" "$tmp/quant/quant-heatmap-nvfp4-e4m3-row-fp32.gp" &&
        [ "$(ls "$tmp/quant"/quant-heatmap-*.png | wc -l)" -eq 2 ]
    ok $? "quant: the SQNR of the two columns named (the recipe nvfp4: its one counted), 4 kinds, steps 0, 20, 40"
    $ampdiag plot "$tmp/fp32.h5" -o "$tmp/quants" --format svg --quant all --quant-metric flush \
        > "$tmp/out" 2> "$tmp/err"
    c=$(check_charts "$tmp/quants" svg "$tmp/out" "$tmp/err")
    ok $? "quant --format svg --quant all --quant-metric flush: $c charts valid, gnuplot silent"
    grep -q "^metric = 1" "$tmp/quants/quant-heatmap-nvfp4-e4m3-row-fp32.gp"
    ok $? "... the share flushed (metric 1)"
else
    for i in 1 2 3 4 5; do skip "gnuplot not installed"; done
fi
$ampdiag plot "$tmp/fp32.h5" -o "$tmp/qbad" --quant nvfp4 --quant-metric snr > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "quant-metric" "$tmp/err"
ok $? "--quant-metric snr: exit 2 naming the option (got $s)"

# ------------------------------------------------------------------ reference traces
refs=$(ls "$srcdir"/traces/*.h5 2> /dev/null)
if [ $have_gnuplot = 1 ] && [ -n "$refs" ]; then
    for r in $refs; do
        b=$(basename "$r" .h5)
        $ampdiag plot "$r" -o "$tmp/ref-$b" > "$tmp/out" 2> "$tmp/err"
        s=$?
        c=$(check_charts "$tmp/ref-$b" png "$tmp/out" "$tmp/err")
        [ $s -eq 0 ] && [ $? -eq 0 ] && [ "$c" -ge 3 ]
        ok $? "reference trace $b: $c charts, valid, gnuplot silent"
    done
else
    skip "no reference traces in $srcdir/traces (or no gnuplot)"
fi

# ------------------------------------------------------------------ gnuplot missing
nognu="$tmp/nognuplot-bin"
mkdir "$nognu"
old_ifs=$IFS
IFS=:
for d in $PATH; do
    [ -d "$d" ] || continue
    for f in "$d"/*; do
        b=${f##*/}
        case $b in gnuplot*) continue ;; esac
        [ -x "$f" ] && [ ! -e "$nognu/$b" ] && ln -s "$f" "$nognu/$b" 2> /dev/null
    done
done
IFS=$old_ifs
PATH=$nognu $ampdiag plot "$tmp/fp16.h5" -o "$tmp/nognu" > "$tmp/out" 2> "$tmp/err"
s=$?
[ $s -eq 3 ]
ok $? "gnuplot missing: exit 3 (got $s)"
grep -q "gnuplot was not found" "$tmp/err" && grep -q "draw-all.sh" "$tmp/err"
ok $? "gnuplot missing: the message says so and where the scripts are"
[ -f "$tmp/nognu/loss.gp" ] && [ -f "$tmp/nognu/loss.dat" ] && [ -f "$tmp/nognu/fp16-heatmap-fp16.gp" ] &&
    [ -x "$tmp/nognu/draw-all.sh" ] && ! ls "$tmp/nognu"/*.png > /dev/null 2>&1
ok $? "gnuplot missing: scripts, data and draw-all.sh written, no chart"
if [ $have_gnuplot = 1 ]; then
    "$tmp/nognu/draw-all.sh" > /dev/null 2> "$tmp/err" && [ ! -s "$tmp/err" ] &&
        png_ok "$tmp/nognu/loss.png" 1200 650 && png_ok "$tmp/nognu/layer-ranges-activation.png" 1200 900
    ok $? "draw-all.sh draws them later where gnuplot is"
else
    skip "gnuplot not installed"
fi

# ------------------------------------------------------------------ bad input
$ampdiag plot "$tmp/nosuch.h5" -o "$tmp/bad" > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "nosuch.h5" "$tmp/err"
ok $? "a missing trace: exit 2 naming it (got $s: $(head -c 200 "$tmp/err"))"
# runs of different models: each run's own charts are titled with its own model and data, the
# charts of both name each run's (no data needs gnuplot: --no-draw)
$ampdiag plot "$tmp/fp32.h5" "$tmp/tr.h5" -o "$tmp/mixed" --no-draw > /dev/null 2> "$tmp/err"
s=$?
grep -q "^chart_title = .*(.*fp32.h5) - mlp on synthetic:blobs'" "$tmp"/mixed/fp16-heatmap-fp32*.gp &&
    grep -q "^chart_title = .*(.*tr.h5) - transformer on synthetic:tokens'" "$tmp"/mixed/fp16-heatmap-bf16*.gp &&
    grep -q "^chart_title = 'Training loss: .* - .*mlp on synthetic:blobs; .*transformer on synthetic:tokens'" \
        "$tmp/mixed/loss.gp"
ok $? "runs of an mlp and a transformer: each run's charts titled with its own model and data (exit $s)"

printf 'not a trace\n' > "$tmp/junk.h5"
$ampdiag plot "$tmp/fp32.h5" "$tmp/junk.h5" -o "$tmp/bad" > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "junk.h5" "$tmp/err"
ok $? "a file that is not a trace: exit 2 naming it (got $s)"
$ampdiag plot "$tmp/fp32.h5" > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q -- "-o" "$tmp/err"
ok $? "no -o: exit 2 (got $s)"
$ampdiag plot "$tmp/fp32.h5" -o "$tmp/bad" --format jpeg > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "jpeg" "$tmp/err"
ok $? "--format jpeg: exit 2 naming it (got $s)"
$ampdiag plot "$tmp/fp32.h5" -o "$tmp/bad" --layers fc1,nosuch > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "'nosuch'" "$tmp/err"
ok $? "--layers with an unknown layer: exit 2 naming it (got $s)"
$ampdiag plot "$tmp/fp32.h5" -o "$tmp/bad" --clip -3 > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q -- "--clip" "$tmp/err"
ok $? "--clip -3: exit 2 (got $s)"
$ampdiag plot "$tmp/fp32.h5" -o "$tmp/fp32.h5" > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 2 ] && grep -q "not a directory" "$tmp/err"
ok $? "-o naming a file: exit 2 (got $s)"
AMPDIAG_PLOTS_DIR=$tmp/none $ampdiag plot "$tmp/fp32.h5" -o "$tmp/bad" > /dev/null 2> "$tmp/err"
s=$?
[ $s -eq 3 ] && grep -q "AMPDIAG_PLOTS_DIR" "$tmp/err"
ok $? "templates not found: exit 3 saying where they were looked for (got $s)"
$ampdiag plot --help | grep -q "exponent-histogram"
ok $? "--help lists the charts"

# a diverging run's loss spans 25 decades: its log axis gets at most 8 labels, every k-th power
# of ten (a readable axis, not 40 overprinted ones)
if $ampdiag run --scenario lr-diverge --steps 30 --progress none -o "$tmp/div.h5" > /dev/null 2>&1 &&
    $ampdiag plot "$tmp/div.h5" "$tmp/fp32.h5" -o "$tmp/div" --no-draw > /dev/null 2>&1; then
    spec=$(sed -n 's/^ytics_spec = "(\(.*\))"$/\1/p' "$tmp/div/loss.gp")
    labels=$(echo "$spec" | tr ',' '\n' | grep -c "'")
    decades=$(echo "$spec" | tr ',' '\n' | sed -n "s/^ *'\([^']*\)'.*/\1/p" | tail -1)
    [ -n "$spec" ] && [ "$labels" -ge 3 ] && [ "$labels" -le 8 ]
    ok $? "loss of a diverging run: $labels labels on its log axis, up to $decades"
    spec=$(sed -n 's/^ytics_spec = "(\(.*\))"$/\1/p' "$tmp/div/grad-norm.gp")
    labels=$(echo "$spec" | tr ',' '\n' | grep -c "'")
    [ -n "$spec" ] && [ "$labels" -le 8 ]
    ok $? "gradient norm: $labels labels on its log axis"
else
    ok 1 "the diverging run and its charts"
    skip "(no diverging run)"
fi

echo "1..$n"
exit $failed
