# quant-heatmap.gp - layer x step heatmaps of what a block-scaled (or per-tensor-scaled) scheme
# would do to each layer: its SQNR in dB (metric 0) or the share of values it flushes to zero
# (metric 1), a panel per tensor kind (template of ampdiag plot: quant-heatmap-COLUMN-RUN.gp).
#
# Variables (written before this template in quant-heatmap-COLUMN-RUN.gp of the output
# directory):
#   outfile, term ('png' or 'svg'), width, height, chart_title, chart_subtitle; chart_head,
#   head_lines: the heading (title and subtitle wrapped to the width) and its lines
#   npanels; panel_file[p], panel_title[p], panel_first[p], panel_rows[p]
#   row_name[panel_first[p] + i]: the layer of row i (1-based) of panel p; row_font, row_every
#   ncols, x0, dx: the matrix columns are steps x0, x0 + dx, ...; xmin, xmax
#   metric: 0 SQNR (dB, cbmin..cbmax: dark is a large error), 1 share flushed (cbmin..1, log)
# Data: panel_file[p] holds panel_rows[p] x ncols float32 (native byte order), one row per
#   layer, one column per step; NaN where nothing was recorded.
if (term eq 'svg') {
    set terminal svg size width,height fixed enhanced font 'Sans,12' background '#ffffff'
} else {
    set terminal pngcairo size width,height enhanced font 'Sans,11' background '#ffffff'
}
set output outfile

ncol = npanels > 1 ? 2 : 1
nrow = (npanels + 1) / 2
left = 0.13; right = 0.915; top = 0.935 - 0.025 * head_lines; bottom = 0.07
gapx = 0.14; gapy = 0.075
pw = (right - left - (ncol - 1) * gapx) / ncol
ph = (top - bottom - (nrow - 1) * gapy) / nrow
row_font_spec = sprintf(',%d', row_font)

set multiplot title chart_head
set xrange [xmin:xmax]
if (metric == 1) {
    set logscale cb 10
    set format cb '10^{%L}'
    set cbtics 10
    set palette defined (0 '#f7fbff', 0.35 '#9ecae1', 0.7 '#3182bd', 1 '#08306b')
    set cblabel 'share flushed to zero' offset 0.5, 0
} else {
    set palette defined (0 '#67000d', 0.3 '#de2d26', 0.6 '#fc9272', 1 '#fff5f0')
    set cblabel 'SQNR (dB)' offset 1.5, 0
}
set cbrange [cbmin:cbmax]
set border 15
set tics out nomirror
unset key
# cells never recorded (NaN) are not drawn: the grey behind them shows through
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
    # metric 1: 0 and tiny shares take the lightest colour; a NaN cell stays NaN (grey)
    if (term eq 'svg') {
        plot panel_file[p] binary array=(ncols, panel_rows[p]) format='%float32' \
            origin=(x0, 0) dx=dx dy=1 \
            using ($1 != $1 ? NaN : (metric == 1 ? ($1 > cbmin ? $1 : cbmin / 2) : $1)) \
            with image pixels notitle
    } else {
        plot panel_file[p] binary array=(ncols, panel_rows[p]) format='%float32' \
            origin=(x0, 0) dx=dx dy=1 \
            using ($1 != $1 ? NaN : (metric == 1 ? ($1 > cbmin ? $1 : cbmin / 2) : $1)) \
            with image notitle
    }
}
unset multiplot
