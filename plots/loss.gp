# loss.gp - training and eval loss of every run against step (template of ampdiag plot).
#
# ampdiag writes loss.gp in the output directory: these variables, then this template.
#   outfile, term ('png' or 'svg'), width, height   output file, format, size in pixels
#   chart_title, chart_subtitle                      text (enhanced markup escaped)
#   chart_head                                       the heading: both, wrapped to the width
#   nruns; run_title[r], run_color[r], run_color_light[r]; has_eval[r]   r = 1..nruns
#   xmin, xmax, ymin, ymax; logy (1: log scale); ytics_spec, mytics_n: the log axis' labels; smooth_w (moving-average window, steps)
#   nskip, nnonfinite                                markers in total (for the key)
# Data (index r-1 = run r):
#   loss.dat        step, loss (NaN where not finite), centred moving average
#   loss-eval.dat   step, eval loss, eval metric
#   loss-marks.dat  index 2(r-1): skipped steps; 2(r-1)+1: NaN/inf events; columns step, y
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

set title chart_head
set xlabel 'optimizer step'
set ylabel 'loss (cross-entropy, nats)'
set xrange [xmin:xmax]
set yrange [ymin:ymax]
if (logy) {
    set logscale y 10
    set ylabel 'loss (cross-entropy, nats; log scale)'
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
    for [r=1:nruns] 'loss.dat' index r-1 using 1:2 with lines lw 0.8 lc rgb run_color_light[r] notitle, \
    for [r=1:nruns] 'loss.dat' index r-1 using 1:3 with lines lw lwr(r) lc rgb run_color[r] \
        title run_title[r].' train', \
    for [r=1:nruns] 'loss-eval.dat' index r-1 using 1:2 with linespoints dt 2 lw 1.5 pt 7 ps 1.0 \
        lc rgb run_color[r] title (has_eval[r] ? run_title[r].' eval' : ''), \
    for [r=1:nruns] 'loss-marks.dat' index 2*r-2 using 1:2 with points pt 6 ps 0.9 \
        lc rgb run_color[r] notitle, \
    for [r=1:nruns] 'loss-marks.dat' index 2*r-1 using 1:2 with points pt 9 ps 1.4 \
        lc rgb run_color[r] notitle, \
    for [i=1:(nskip > 0)] keyentry with points pt 6 ps 0.9 lc rgb '#000000' title 'skipped step', \
    for [i=1:(nnonfinite > 0)] keyentry with points pt 9 ps 1.4 lc rgb '#000000' \
        title 'NaN/inf in forward or backward'
