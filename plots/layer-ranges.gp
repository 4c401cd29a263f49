# layer-ranges.gp - per layer (small multiples): largest and smallest non-zero |x| of one tensor
# kind against step, with the FP16 and BF16 limits as bands (template of ampdiag plot).
#
# Variables (written before this template in layer-ranges-KIND.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head,
#   head_lines: the heading (title and subtitle wrapped to the width) and its lines
#   nruns; run_title[r], run_color[r], run_color_light[r]   r = 1..nruns
#   datafile; npanels; panel_title[p]                       p = 1..npanels (layers)
#   xmin, xmax; ymin, ymax, ytic (powers of 2; ytic = factor between ticks)
#   nnonfinite: number of points with inf/NaN values (for the key)
#   band_n; band_lo[i], band_hi[i], band_color[i], band_alpha[i]: the formats' bands inside
#   [ymin, ymax] (out of range, subnormal); bkey_n; bkey_color[i], bkey_alpha[i], bkey_title[i]:
#   the legend entries of the bands drawn, none for a band outside the range
# Data: datafile, index (p-1)*nruns + r-1: step, largest finite |x|, smallest non-zero |x| (NaN:
#   none), fraction of inf/NaN values (marked along the top of the panel where > 0)
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

# layout: panels in a grid; the key in a strip along the bottom, as many rows as it needs
ncol = npanels <= 3 ? npanels : (npanels <= 4 ? 2 : (npanels <= 9 ? 3 : 4))
nrow = (npanels + ncol - 1) / ncol
key_entries = nruns + 2 + (nnonfinite > 0) + bkey_n
key_cols = 3
key_rows = (key_entries + key_cols - 1) / key_cols
key_h = 0.028 * key_rows + 0.02
left = 0.075; right = 0.985; top = 0.945 - 0.025 * head_lines; bottom = key_h + 0.075
gapx = 0.035; gapy = 0.075
pw = (right - left - (ncol - 1) * gapx) / ncol
ph = (top - bottom - (nrow - 1) * gapy) / nrow

set multiplot title chart_head
set xrange [xmin:xmax]
set yrange [ymin:ymax]
set logscale y 2
set ytics ymin, ytic, ymax
set mytics 1
set border 3
set tics nomirror
set grid xtics ytics lc rgb '#e4e4e4' lw 1 dt 1
unset key
lwr(r) = nruns > 1 ? 3.2 - 1.8 * (r - 1) / (nruns - 1) : 2.2

# the formats' bands (ampdiag wrote only those inside the y range)
do for [i=1:band_n] {
    set object i rect from graph 0, first band_lo[i] to graph 1, first band_hi[i] behind \
        fc rgb band_color[i] fs transparent solid band_alpha[i] noborder
}

do for [p=1:npanels] {
    col = (p - 1) % ncol
    row = (p - 1) / ncol
    set lmargin at screen left + col * (pw + gapx)
    set rmargin at screen left + col * (pw + gapx) + pw
    set tmargin at screen top - row * (ph + gapy)
    set bmargin at screen top - row * (ph + gapy) - ph
    set title panel_title[p] offset 0, -0.6
    if (p + ncol > npanels) {
        set xlabel 'optimizer step' offset 0, 0.4
        set format x '%g'
    } else {
        unset xlabel
        set format x ''
    }
    if (col == 0) {
        set ylabel '|x| (log_2 scale)' offset 1, 0
        set format y '2^{%L}'
    } else {
        unset ylabel
        set format y ''
    }
    plot \
        for [r=1:nruns] datafile index (p - 1) * nruns + r - 1 using 1:2 with lines lw lwr(r) \
            lc rgb run_color[r] notitle, \
        for [r=1:nruns] datafile index (p - 1) * nruns + r - 1 using 1:3 with lines lw 1 \
            lc rgb run_color[r] notitle, \
        for [r=1:nruns] datafile index (p - 1) * nruns + r - 1 \
            using 1:($4 > 0 ? ymax / 2**(1.5 * r) : NaN) with points pt 9 ps 0.5 \
            lc rgb run_color[r] notitle
}

# the key, in its strip below the panels
unset object
unset title
unset xlabel
unset ylabel
unset logscale
unset grid
unset border
unset tics
set xrange [0:1]
set yrange [0:1]
set lmargin at screen 0.02
set rmargin at screen 0.98
set tmargin at screen key_h + 0.01
set bmargin at screen 0.005
set key center center horizontal maxcols key_cols maxrows key_rows Left reverse width 2 samplen 2.5 spacing 1.1
plot NaN notitle, \
    for [r=1:nruns] keyentry with lines lw lwr(r) lc rgb run_color[r] title run_title[r], \
    keyentry with lines lw 2.6 lc rgb '#000000' title 'thick: largest |x|', \
    keyentry with lines lw 1 lc rgb '#000000' title 'thin: smallest non-zero |x|', \
    for [i=1:(nnonfinite > 0)] keyentry with points pt 9 ps 0.8 lc rgb '#000000' \
        title 'inf/NaN values present (top)', \
    for [i=1:bkey_n] keyentry with boxes fc rgb bkey_color[i] fs transparent solid bkey_alpha[i] noborder \
        title bkey_title[i]
unset multiplot
