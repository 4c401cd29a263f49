# exponent-histogram.gp - log2 exponent histograms of one layer's gradients at a few steps, with
# the exponents FP16 and BF16 represent shaded (template of ampdiag plot).
#
# Variables (written before this template in exponent-histogram-RUN-LAYER.gp):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head,
#   head_lines: the heading (title and subtitle wrapped to the width) and its lines
#   datafile; npanels (1 or 2: activation / weight gradients); panel_title[p]
#   nsteps; step_title[(p-1)*nsteps + k]; step_shift[k] = log2(loss scale) at step k
#   scaled (1: a loss-scaled run: the data also holds the unscaled histograms)
#   xmin, xmax (binary exponents), ymin, ymax (fractions)
#   fp16_emin, fp16_emax, fp16_esub, bf16_emin, bf16_emax, bf16_esub: normal exponent range
#   and smallest subnormal exponent of each format; window_shown[4]: whether the x range shows
#   FP16 normal, FP16 subnormal, BF16 normal, BF16 subnormal exponents (drawn and in the legend
#   only then)
# Data: datafile, index ((p-1)*nsteps + k-1)*2 + {0: as held, 1: unscaled}: x = e + 0.5 (the
#   centre of bin e: 2^e <= |x| < 2^(e+1)), fraction of the tensor's values (zeros, inf and
#   NaN counted in the total; 0 for an empty bin)
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile
array step_color[6] = ['#1b9e77', '#d95f02', '#7570b3', '#e7298a', '#66a61e', '#a6761d']

left = 0.08; right = 0.70; top = 0.935 - 0.025 * head_lines; bottom = 0.085; gapy = 0.08
ph = (top - bottom - (npanels - 1) * gapy) / npanels

set multiplot title chart_head
set xrange [xmin:xmax]
set yrange [ymin:ymax]
set logscale y 10
set format y '10^{%L}'
set xtics 4
set mxtics 4
set border 3
set tics nomirror out
set grid xtics ytics lc rgb '#e4e4e4' lw 1 dt 1
set key outside right top vertical Left reverse spacing 1.2 samplen 2.5 width -2

floor0(y) = y > 0 ? y : ymin / 10   # empty bins: below the axis, so the steps drop there
cx(x) = x < xmin ? xmin : (x > xmax ? xmax : x)
# FP16: normal exponents shaded over the whole height, subnormal lighter
set object 1 rect from first cx(fp16_emin), graph 0 to first cx(fp16_emax + 1), graph 1 behind \
    fc rgb '#0072b2' fs transparent solid 0.13 noborder
set object 2 rect from first cx(fp16_esub), graph 0 to first cx(fp16_emin), graph 1 behind \
    fc rgb '#0072b2' fs transparent solid 0.05 noborder
# BF16: a strip along the top (its window is wider than most charts)
set object 3 rect from first cx(bf16_emin), graph 0.955 to first cx(bf16_emax + 1), graph 1 \
    fc rgb '#7b3294' fs transparent solid 0.45 noborder
set object 4 rect from first cx(bf16_esub), graph 0.955 to first cx(bf16_emin), graph 1 \
    fc rgb '#7b3294' fs transparent solid 0.18 noborder

do for [p=1:npanels] {
    y1 = top - (p - 1) * (ph + gapy)
    set lmargin at screen left
    set rmargin at screen right
    set tmargin at screen y1
    set bmargin at screen y1 - ph
    set title panel_title[p] offset 0, -0.6
    set ylabel 'fraction of the values (log scale)'
    if (p == npanels) {
        set xlabel 'binary exponent e  (bin e: 2^{e} ≤ |x| < 2^{e+1})'
    } else {
        unset xlabel
    }
    plot \
        for [k=1:nsteps] datafile index ((p - 1) * nsteps + k - 1) * 2 using 1:(floor0($2)) with histeps \
            lw 2 lc rgb step_color[(k - 1) % 6 + 1] title step_title[(p - 1) * nsteps + k], \
        for [k=1:nsteps * scaled] datafile index ((p - 1) * nsteps + k - 1) * 2 + 1 using 1:(floor0($2)) \
            with histeps lw 1.2 dt 2 lc rgb step_color[(k - 1) % 6 + 1] notitle, \
        for [i=1:(scaled && p == 1)] keyentry with lines lw 1.2 dt 2 lc rgb '#000000' \
            title 'dashed: unscaled (÷ loss scale)', \
        for [i=1:(p == 1 && window_shown[1])] keyentry with boxes fc rgb '#0072b2' fs transparent solid 0.3 \
            noborder title 'FP16 normal (2^{-14} to 65504)', \
        for [i=1:(p == 1 && window_shown[2])] keyentry with boxes fc rgb '#0072b2' fs transparent solid 0.12 \
            noborder title 'FP16 subnormal (2^{-24} to 2^{-14})', \
        for [i=1:(p == 1 && window_shown[3])] keyentry with boxes fc rgb '#7b3294' fs transparent solid 0.45 \
            noborder title 'BF16 normal (top strip)', \
        for [i=1:(p == 1 && window_shown[4])] keyentry with boxes fc rgb '#7b3294' fs transparent solid 0.18 \
            noborder title 'BF16 subnormal (top strip)'
}
unset multiplot
