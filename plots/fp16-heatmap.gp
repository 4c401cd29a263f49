# fp16-heatmap.gp - layer x step heatmaps of the fraction of values that would flush to zero
# or overflow (round to inf) in a format (FP16, or a what-if format), per tensor kind; of a run
# in that very format, the increase of its share of exact zeros over an FP32 run instead
# (template of ampdiag plot: FORMAT-heatmap-RUN.gp).
#
# Variables (written before this template in FORMAT-heatmap-RUN.gp of the output directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head,
#   head_lines: the heading (title and subtitle wrapped to the width) and its lines
#   npanels; panel_file[p], panel_title[p], panel_first[p], panel_rows[p], panel_kind[p]
#   (0 flush to zero, 1 overflow, 2 increase of exact zeros over an FP32 run, 3 exact zeros); marks_file, nmarks: per panel (index p-1) the
#   cells "step row" a loss scale would keep (drawn as small circles)
#   row_name[panel_first[p] + i]: the layer of row i (1-based) of panel p; row_font, row_every
#   ncols, x0, dx: the matrix columns are steps x0, x0 + dx, ...; xmin, xmax
# Data: panel_file[p] holds panel_rows[p] x ncols float32 (native byte order), one row per
#   layer, one column per step: the fraction (0..1), NaN where nothing was recorded.
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

# two columns (underflow, overflow), one row per tensor kind
ncol = 2
nrow = (npanels + 1) / 2
left = 0.13; right = 0.915; top = 0.935 - 0.025 * head_lines; bottom = 0.07
gapx = 0.14; gapy = 0.075
pw = (right - left - (ncol - 1) * gapx) / ncol
ph = (top - bottom - (nrow - 1) * gapy) / nrow
floor_value = 1e-6   # fractions below this (and 0) get the lightest colour
row_font_spec = sprintf(',%d', row_font)

set multiplot title chart_head
set xrange [xmin:xmax]
set logscale cb 10
set cbrange [floor_value:1]
set format cb '10^{%L}'
set cbtics 10
set border 15
set tics out nomirror
set colorbox user size 0.012, ph
unset key
# cells never recorded (NaN) are not drawn: the grey behind them shows through (never 0%)
set object 1 rect from graph 0, graph 0 to graph 1, graph 1 behind fc rgb '#c8c8c8' \
    fs solid 1.0 noborder

do for [p=1:npanels] {
    col = (p - 1) % ncol
    row = (p - 1) / ncol
    x1 = left + col * (pw + gapx)
    y1 = top - row * (ph + gapy)
    set lmargin at screen x1
    set rmargin at screen x1 + pw
    set tmargin at screen y1
    set bmargin at screen y1 - ph
    set colorbox user origin screen x1 + pw + 0.012, screen y1 - ph size screen 0.012, screen ph
    set title panel_title[p] offset 0, -0.6
    set yrange [panel_rows[p] - 0.5:-0.5]   # first layer at the top
    set ytics ()
    set ytics font row_font_spec
    do for [i=1:panel_rows[p]] {
        if ((i - 1) % row_every == 0) {
            set ytics add (row_name[panel_first[p] + i] i - 1)
        }
    }
    if (p + ncol > npanels) {
        set xlabel 'optimizer step' offset 0, 0.4
    } else {
        unset xlabel
    }
    if (panel_kind[p] == 1) {
        set palette defined (0 '#fff5f0', 0.35 '#fc9272', 0.7 '#de2d26', 1 '#67000d')
        set cblabel 'fraction overflowing' offset -0.5, 0
    } else {
        if (panel_kind[p] >= 2) {
            set palette defined (0 '#fcfbfd', 0.35 '#bcbddc', 0.7 '#807dba', 1 '#3f007d')
            set cblabel (panel_kind[p] == 2 ? 'extra share of zeros' : 'share of exact zeros') offset -0.5, 0
        } else {
            set palette defined (0 '#f7fbff', 0.35 '#9ecae1', 0.7 '#3182bd', 1 '#08306b')
            set cblabel 'fraction flushing to zero' offset -0.5, 0
        }
    }
    # a NaN cell (not recorded) stays NaN: not drawn, the grey shows; 0 and tiny fractions
    # take the lightest colour
    if (term eq 'svg') {
        plot panel_file[p] binary array=(ncols, panel_rows[p]) format='%float32' \
            origin=(x0, 0) dx=dx dy=1 using ($1 != $1 ? NaN : ($1 > floor_value ? $1 : floor_value / 2)) \
            with image pixels notitle, \
            marks_file index p - 1 using 1:2 with points pt 7 ps 0.22 lc rgb '#ffffff' notitle
    } else {
        plot panel_file[p] binary array=(ncols, panel_rows[p]) format='%float32' \
            origin=(x0, 0) dx=dx dy=1 using ($1 != $1 ? NaN : ($1 > floor_value ? $1 : floor_value / 2)) \
            with image notitle, \
            marks_file index p - 1 using 1:2 with points pt 7 ps 0.22 lc rgb '#ffffff' notitle
    }
}
unset multiplot
