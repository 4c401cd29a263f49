# loss-scale.gp - loss scale (log2 axis) of the runs that used one (template of ampdiag plot).
#
# Variables (written before this template in loss-scale.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head:
#   the heading (title and subtitle wrapped to the width)
#   nruns; run_title[r], run_color[r], run_color_light[r]   r = 1..nruns (scaled runs only)
#   xmin, xmax; ymin, ymax, ytic (powers of 2; ytic = factor between ticks)
#   nbackoff, ngrowth                                       markers in total (for the key)
# Data (index r-1 = run r):
#   loss-scale.dat        step, loss scale used in that step
#   loss-scale-marks.dat  index 2(r-1): backoffs, 2(r-1)+1: growths; columns step, scale at it
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

set title chart_head
set xlabel 'optimizer step'
set ylabel 'loss scale (log_2 scale)'
set xrange [xmin:xmax]
set yrange [ymin:ymax]
set logscale y 2
set format y '2^{%L}'
set ytics ymin, ytic, ymax
set border 3
set tics nomirror
set grid xtics ytics lc rgb '#e4e4e4' lw 1 dt 1
set key outside below center horizontal maxrows 2 Left reverse spacing 1.2 samplen 2.5 width 1 height 1.5
lwr(r) = nruns > 1 ? 3.6 - 2.2 * (r - 1) / (nruns - 1) : 2.5

plot \
    for [r=1:nruns] 'loss-scale.dat' index r-1 using 1:2 with steps lw lwr(r) lc rgb run_color[r] \
        title run_title[r], \
    for [r=1:nruns] 'loss-scale-marks.dat' index 2*r-2 using 1:2 with points pt 11 ps 1.1 \
        lc rgb run_color[r] notitle, \
    for [r=1:nruns] 'loss-scale-marks.dat' index 2*r-1 using 1:2 with points pt 9 ps 1.1 \
        lc rgb run_color[r] notitle, \
    for [i=1:(nbackoff > 0)] keyentry with points pt 11 ps 1.1 lc rgb '#000000' \
        title 'backoff (non-finite gradients)', \
    for [i=1:(ngrowth > 0)] keyentry with points pt 9 ps 1.1 lc rgb '#000000' title 'growth'
