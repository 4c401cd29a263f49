# grad-norm.gp - global gradient norm against step with clip values (template of ampdiag plot).
#
# Variables (written before this template in grad-norm.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head:
#   the heading (title and subtitle wrapped to the width)
#   nruns; run_title[r], run_color[r], run_color_light[r]   r = 1..nruns
#   xmin, xmax, ymin, ymax; logy (1: log scale); ytics_spec, mytics_n: the log axis' labels
#   nclip; clip_title[i], clip_color[i], clip_dt[i]          i = 1..nclip
# Data: grad-norm.dat (index r-1: step, norm (unscaled, before clipping; NaN where not finite),
#   centred moving average); grad-norm-clip.dat (index i-1: two points of the clip line i)
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

set title chart_head
set xlabel 'optimizer step'
set ylabel 'gradient L2 norm (unscaled, before clipping)'
set xrange [xmin:xmax]
set yrange [ymin:ymax]
if (logy) {
    set logscale y 10
    set ylabel 'gradient L2 norm (unscaled, before clipping; log scale)'
    set format y '%g'
    # at most 8 labels whatever the range: 2x and 5x the powers of ten when there are few
    # decades, every k-th power of ten when there are many (ytics_spec, written by ampdiag)
    eval('set ytics '.ytics_spec)
    set mytics mytics_n
}
set border 3
set tics nomirror
set grid xtics ytics mytics lc rgb '#e4e4e4' lw 1 dt 1
set key outside below center horizontal maxrows 2 Left reverse spacing 1.2 samplen 2.5 width 1 height 1.5
# runs drawn first are drawn wider, so that identical curves all stay visible
lwr(r) = nruns > 1 ? 3.6 - 2.2 * (r - 1) / (nruns - 1) : 2.5

plot \
    for [r=1:nruns] 'grad-norm.dat' index r-1 using 1:2 with lines lw 0.8 lc rgb run_color_light[r] \
        notitle, \
    for [r=1:nruns] 'grad-norm.dat' index r-1 using 1:3 with lines lw lwr(r) lc rgb run_color[r] \
        title run_title[r], \
    for [i=1:nclip] 'grad-norm-clip.dat' index i-1 using 1:2 with lines lw 2 dt clip_dt[i] \
        lc rgb clip_color[i] title clip_title[i]
