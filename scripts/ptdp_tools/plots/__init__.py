"""Plots from the result CSVs: figures (the paper's figures and tables), history (throughput over
builds) with changes (its change points), loss_curves (`ptdp train --loss-log` files)."""
