"""Plots from the result CSVs: figures (the paper's figures and tables), history (throughput over
builds) with changes (its change points), gate (its nightly gate against a baseline window, with
acknowledgements; gate_power its power from a simulation), history_page (its interactive page) and
history_export (Bencher's and asv's formats), loss_curves (`ptdp train --loss-log` files)."""
