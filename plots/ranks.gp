# ranks.gp - one line per rank of a distributed run read from its ranks' traces: the training
# loss, the gradient norm and (where a rank used one) the loss scale against step (template of
# ampdiag plot).
#
# Variables (written before this template in ranks-RUN.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head,
#   head_lines: the heading (title and subtitle wrapped to the width) and its lines
#   datafile; nranks; rank_title[k], rank_color[k]   k = 1..nranks
#   npanels (2, or 3 with the loss scale); panel_title[p], panel_log[p] (0 linear, 10 log10,
#   2 log2), panel_min[p], panel_max[p]
#   xmin, xmax; key (1: a legend entry per rank)
# Data: datafile, index (p-1)*nranks + k-1: step, value of rank k in panel p (NaN where it is
#   not finite: the line breaks there)
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

left = 0.09; right = 0.80; top = 0.935 - 0.025 * head_lines; bottom = 0.075; gapy = 0.07
ph = (top - bottom - (npanels - 1) * gapy) / npanels

set multiplot title chart_head
set xrange [xmin:xmax]
set border 3
set tics nomirror out
set grid xtics ytics lc rgb '#e4e4e4' lw 1 dt 1
if (key) {
    set key outside right top vertical Left reverse spacing 1.1 samplen 2.5
} else {
    unset key
}
lwr(k) = nranks > 1 ? 3.0 - 1.8 * (k - 1) / (nranks - 1) : 2.0

do for [p=1:npanels] {
    y1 = top - (p - 1) * (ph + gapy)
    set lmargin at screen left
    set rmargin at screen right
    set tmargin at screen y1
    set bmargin at screen y1 - ph
    set title panel_title[p] offset 0, -0.6
    unset logscale y
    set format y '%g'
    set yrange [panel_min[p]:panel_max[p]]
    if (panel_log[p] == 10) {
        set logscale y 10
    }
    if (panel_log[p] == 2) {
        set logscale y 2
        set format y '2^{%L}'
    }
    if (p == npanels) {
        set xlabel 'optimizer step'
    } else {
        unset xlabel
    }
    plot for [k=1:nranks] datafile index (p - 1) * nranks + k - 1 using 1:2 \
        with linespoints lw lwr(k) pt 7 ps 0.5 lc rgb rank_color[k] title (p == 1 ? rank_title[k] : '')
}
unset multiplot
