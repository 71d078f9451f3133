# bench/plot.gp — the two panels of the memory-cap figure (bench/figures.png in
# docs/benchmarks.md), from the tables bench/figures.sh derives from the merged
# bench CSV (see plot_data there).
#
# Variables (gnuplot -e "..."):
#   dir       folder holding plot_cache.dat, plot_cap_off.dat, plot_cap_auto.dat and, from
#             figures.sh --llama-bench, plot_cap_llama.dat and plot_cap_llama_failed.dat
#             (default: bench/out/figures, figures.sh's default --out)
#   png       output file (default: DIR/figures.png)
#   model     model file name (title)
#   settings  one line describing -p/-n/-r/-t (title)
#   sweep_cap the memory cap of the cache sweep (left panel title)
# Tables: whitespace separated, x decode_tps decode_tps_sd label.
#   Left:  decode tok/s against the resolved expert cache budget (MiB), under
#          the cache sweep's cap; the auto point is labelled.
#   Right: decode tok/s against the memory cap (GiB), cache off and auto; an
#          uncapped run sits at the machine's RAM and is labelled "none". With
#          llama.cpp rows, llama-bench (mmap, cold per process) is a third series,
#          and caps where it failed (plot_cap_llama_failed.dat: cap_GiB reason,
#          e.g. OOM-killed) are marked on the x axis with the reason.

if (!exists("dir")) dir = "bench/out/figures"
if (!exists("png")) png = dir . "/figures.png"
if (!exists("model")) model = "model"
if (!exists("settings")) settings = ""
if (!exists("sweep_cap")) sweep_cap = "?"

cache_dat = dir . "/plot_cache.dat"
off_dat = dir . "/plot_cap_off.dat"
auto_dat = dir . "/plot_cap_auto.dat"
llama_dat = dir . "/plot_cap_llama.dat"
llama_failed_dat = dir . "/plot_cap_llama_failed.dat"

# An empty panel saying why (gnuplot cannot plot an empty table).
empty_panel(why) = sprintf("set label 1 '%s' at graph 0.5, graph 0.5 center; " . \
                           "plot [0:1] [0:1] 2 notitle; unset label 1", why)

# Rows in a table (0 when empty), without gnuplot's errors on empty files.
rows(f) = int(system("grep -c . '" . f . "' || true"))

set terminal pngcairo size 1400,560 enhanced font "DejaVu Sans,11"
set output png
set datafile separator whitespace
set multiplot layout 1,2 title sprintf("sluice bench: %s   (%s)", model, settings) noenhanced

set grid
set key top left
set ylabel "decode tok/s (mean ± sd)"
set yrange [0:*]
set offsets graph 0.04, graph 0.04, graph 0.12, 0

# ---- left: tok/s against cache budget -------------------------------------------------
set title sprintf("decode vs expert cache budget (memory cap %s)", sweep_cap)
set xlabel "expert cache budget (MiB, as resolved; 0 = off)"
set xrange [0:*]
if (rows(cache_dat) > 0) {
  plot cache_dat using 1:2:3 with yerrorlines lw 2 pt 7 title "--cache-mb sweep", \
       cache_dat using 1:2:(strcol(4) eq "auto" ? "auto" : "") with labels offset -2,1.2 notitle
} else {
  eval empty_panel("no cache sweep rows")
}

# ---- right: tok/s against memory cap --------------------------------------------------
set title "decode vs memory cap"
set xrange [*:*]
set xlabel "memory cap (GiB; 'none' = uncapped, at RAM size)"
n_off = rows(off_dat)
n_auto = rows(auto_dat)
n_llama = rows(llama_dat)
n_failed = rows(llama_failed_dat)
if (n_off + n_auto + n_llama + n_failed > 0) {
  series = ""
  engine = n_llama + n_failed > 0 ? "sluice, " : ""  # names the engine only beside llama.cpp
  if (n_off > 0) {
    series = series . sprintf("'%s' using 1:2:3:xtic(4) with yerrorlines lw 2 pt 7 title '%scache off', ", off_dat, engine)
  }
  if (n_auto > 0) {
    series = series . sprintf("'%s' using 1:2:3:xtic(4) with yerrorlines lw 2 pt 5 title '%s--cache-mb auto', ", auto_dat, engine)
  }
  if (n_llama > 0) {
    series = series . sprintf("'%s' using 1:2:3:xtic(4) with yerrorlines lw 2 pt 9 dt 2 title 'llama.cpp (mmap, cold per process)', ", llama_dat)
  }
  if (n_failed > 0) {
    series = series . sprintf("'%s' using 1:(0):(sprintf('llama.cpp: %%s', strcol(2))):xtic(1) with labels point pt 2 ps 2 offset 0,1.5 rotate by 90 left noenhanced notitle, ", llama_failed_dat)
  }
  eval "plot " . series[1:strlen(series) - 2]
} else {
  eval empty_panel("no cap sweep rows")
}

unset multiplot
set output
