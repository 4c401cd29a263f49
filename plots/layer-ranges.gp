# layer-ranges.gp - per layer (small multiples): largest and smallest non-zero |x| of one tensor
# kind against step, with the FP16 and BF16 limits as bands (template of ampdiag plot).
#
# Variables (written before this template in layer-ranges-KIND.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle
#   nruns; run_title[r], run_color[r], run_color_light[r]   r = 1..nruns
#   datafile; npanels; panel_title[p]                       p = 1..npanels (layers)
#   xmin, xmax; ymin, ymax, ytic (powers of 2; ytic = factor between ticks)
#   nnonfinite: number of points with inf/NaN values (for the key)
#   fp16_max, fp16_min_normal, fp16_min_subnormal, bf16_max, bf16_min_normal, bf16_min_subnormal
# Data: datafile, index (p-1)*nruns + r-1: step, largest finite |x|, smallest non-zero |x| (NaN:
#   none), fraction of inf/NaN values (marked along the top of the panel where > 0)
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

# layout: panels in a grid; the key in the grid's empty cells, or in a strip along the bottom
ncol = npanels <= 3 ? npanels : (npanels <= 4 ? 2 : (npanels <= 9 ? 3 : 4))
nrow = (npanels + ncol - 1) / ncol
empty = nrow * ncol - npanels
left = 0.075; right = 0.985; top = 0.895; bottom = empty > 0 ? 0.07 : 0.215
gapx = 0.035; gapy = 0.075
pw = (right - left - (ncol - 1) * gapx) / ncol
ph = (top - bottom - (nrow - 1) * gapy) / nrow

set multiplot title sprintf("%s\n{/*0.85 %s}", chart_title, chart_subtitle)
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

# bands (clamped to the y range so that off-scale limits draw nothing)
cy(y) = y < ymin ? ymin : (y > ymax ? ymax : y)
underflow16 = fp16_min_subnormal / 2   # |x| <= 2^-25 rounds to 0 in FP16
underflowbf = bf16_min_subnormal / 2   # |x| <= 2^-134 rounds to 0 in BF16
set object 1 rect from graph 0, first cy(fp16_max) to graph 1, first ymax behind \
    fc rgb '#d62728' fs transparent solid 0.16 noborder
set object 2 rect from graph 0, first cy(underflow16) to graph 1, first cy(fp16_min_normal) behind \
    fc rgb '#ff9f1c' fs transparent solid 0.18 noborder
set object 3 rect from graph 0, first ymin to graph 1, first cy(underflow16) behind \
    fc rgb '#d62728' fs transparent solid 0.10 noborder
set object 4 rect from graph 0, first cy(bf16_max) to graph 1, first ymax behind \
    fc rgb '#7b3294' fs transparent solid 0.22 noborder
set object 5 rect from graph 0, first cy(underflowbf) to graph 1, first cy(bf16_min_normal) behind \
    fc rgb '#c2a5cf' fs transparent solid 0.35 noborder
set object 6 rect from graph 0, first ymin to graph 1, first cy(underflowbf) behind \
    fc rgb '#7b3294' fs transparent solid 0.22 noborder

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

# the key
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
if (empty > 0) {
    set lmargin at screen left + (ncol - empty) * (pw + gapx)
    set rmargin at screen right
    set tmargin at screen bottom + ph
    set bmargin at screen bottom
    set key center center vertical Left reverse width -2 samplen 2.5 spacing 1.1
} else {
    set lmargin at screen 0.02
    set rmargin at screen 0.98
    set tmargin at screen 0.135
    set bmargin at screen 0.005
    set key center center horizontal maxrows 3 width -2 samplen 2.5 spacing 1.15
}
plot NaN notitle, \
    for [r=1:nruns] keyentry with lines lw lwr(r) lc rgb run_color[r] title run_title[r].': largest |x|', \
    for [r=1:nruns] keyentry with lines lw 1 lc rgb run_color[r] \
        title run_title[r].': smallest non-zero |x|', \
    for [i=1:(nnonfinite > 0)] keyentry with points pt 9 ps 0.8 lc rgb '#000000' \
        title 'inf/NaN values present (top)', \
    keyentry with boxes fc rgb '#d62728' fs transparent solid 0.3 noborder \
        title 'FP16: > 65504 or ≤ 2^{-25} (inf or 0)', \
    keyentry with boxes fc rgb '#ff9f1c' fs transparent solid 0.3 noborder \
        title 'FP16 subnormal: 2^{-24}..2^{-14}', \
    keyentry with boxes fc rgb '#7b3294' fs transparent solid 0.3 noborder \
        title 'BF16: > 3.4·10^{38} or ≤ 2^{-134}', \
    keyentry with boxes fc rgb '#c2a5cf' fs transparent solid 0.45 noborder \
        title 'BF16 subnormal: 2^{-133}..2^{-126}'
unset multiplot
