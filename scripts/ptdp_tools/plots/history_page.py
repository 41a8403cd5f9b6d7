"""The history page (plots/history.py HISTORY PAGE.html, --changes --html PAGE.html): one
self-contained HTML file of fixed width, plotly's standalone page with plotly.js inlined (it works
offline). Per series: the median tokens/s and TFLOP/s per GPU of each build with its noise band
(min to max of its runs); the change points (dashed lines) and the gate's alerts (red) marked; each
build's tick and point linked to its commit (--commit-url, or the checkout's origin remote); a
series filter (the menu; the legend also hides a series); the last 40 builds in view with a range
slider for the rest; the changes as a table below. The library: plotly (Debian's python3-plotly)."""
import html
import json
import subprocess

from ptdp_tools import repo

WIDTH = 1200  # the page's width in pixels, whatever the number of builds
VIEW = 40  # builds in view at first; the range slider shows the rest


def commit_url_template(given):
    """The commit URL with {sha}: GIVEN, else one made from the checkout's origin remote (GitHub,
    GitLab and the like), else None (no links)."""
    if given:
        return given
    try:
        url = subprocess.run(["git", "-C", repo.ROOT, "remote", "get-url", "origin"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if url.startswith("git@") and ":" in url:
        url = "https://" + url[4:].replace(":", "/", 1)
    if not url.startswith("https://"):
        return None
    return url.removesuffix(".git") + "/commit/{sha}"


def link(url, sha):
    """SHA's commit page; a build made from uncommitted changes (`-dirty`) links to its commit."""
    return url.format(sha=sha.removesuffix("-dirty")) if url else ""


def _stats(values):
    v = sorted(values)
    n = len(v)
    return (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])), v[0], v[-1]


def _marks(s, shas_index, changes_of, alert_of):
    """The shapes and annotations of one series' change points and alert."""
    shapes, notes = [], []
    for c in changes_of:
        x = shas_index[c["sha"]] - 0.5
        color = "#d62728" if c["change"] < 0 else "#2ca02c"
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": color, "dash": "dash", "width": 1.5}})
        notes.append({"x": x, "y": 1.0, "xref": "x", "yref": "paper", "xanchor": "left", "yanchor": "bottom",
                      "showarrow": False,
                      "font": {"size": 10, "color": color},
                      "text": f"{c['kind']} {100 * c['change']:+.1f}% ({s['name'][:24]})"})
    if alert_of:
        x0, x1 = shas_index[alert_of["first"]] - 0.5, shas_index[alert_of["last"]] + 0.5
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                       "fillcolor": "rgba(214,39,40,0.12)", "line": {"width": 0}})
        notes.append({"x": x1, "y": 0.5, "xref": "x", "yref": "paper", "xanchor": "right", "showarrow": False,
                      "font": {"size": 11, "color": "#d62728"}, "text": f"ALERT {100 * alert_of['change']:+.1f}%"})
    return shapes, notes


def figure(series, shas, dates, url):
    """The plotly figure: SERIES a list of dicts (name, builds: sha -> (tokens/s runs, TFLOP/s runs),
    changes, alert), SHAS every build in order, DATES their first run's date."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    index = {s: i for i, s in enumerate(shas)}
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("tokens/s (median, band min-max of the runs)", "TFLOP/s per GPU (Eq. 3)"))
    owner, all_shapes, all_notes, per_series = [], [], [], []
    for k, s in enumerate(series):
        color = f"hsl({(210 + k * 67) % 360},65%,40%)"
        for row, col in ((1, 0), (2, 1)):
            pts = [(index[sha], *_stats(v[col]), len(v[col]), sha) for sha, v in s["builds"].items() if v[col]]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            links = [link(url, p[5]) for p in pts]
            hover = [f"{p[5][:12]} {dates[p[5]]}<br>median {p[1]:.4g}, min {p[2]:.4g}, max {p[3]:.4g} ({p[4]} runs)"
                     + ("<br>click: the commit" if url else "") for p in pts]
            fig.add_trace(go.Scatter(x=xs + xs[::-1], y=[p[3] for p in pts] + [p[2] for p in pts][::-1],
                                     fill="toself", fillcolor=color.replace("hsl", "hsla").replace(")", ",0.15)"),
                                     line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=s["name"]),
                          row=row, col=1)
            fig.add_trace(go.Scatter(x=xs, y=[p[1] for p in pts], mode="lines+markers", name=s["name"],
                                     line={"color": color}, marker={"size": 5}, legendgroup=s["name"],
                                     showlegend=row == 1, customdata=links, hovertext=hover, hoverinfo="text"),
                          row=row, col=1)
            owner += [k, k]
        shapes, notes = _marks(s, index, s["changes"], s["alert"])
        per_series.append((shapes, notes))
        all_shapes += shapes
        all_notes += notes
    base_notes = list(fig.layout.annotations)  # the subplot titles
    buttons = [{"label": "all series", "method": "update",
                "args": [{"visible": [True] * len(owner)}, {"shapes": all_shapes, "annotations": base_notes + all_notes}]}]
    for k, s in enumerate(series):
        shapes, notes = per_series[k]
        buttons.append({"label": s["name"][:80], "method": "update",
                        "args": [{"visible": [o == k for o in owner]}, {"shapes": shapes, "annotations": base_notes + notes}]})
    ticks = [f'<a href="{html.escape(link(url, s))}">{s[:8]}</a>' if url else s[:8] for s in shas]
    n = len(shas)
    fig.update_layout(
        width=WIDTH, height=760, autosize=False, hovermode="closest", shapes=all_shapes,
        annotations=base_notes + all_notes, margin={"l": 70, "r": 20, "t": 110, "b": 40},
        title={"text": "ptdp throughput history", "x": 0.01, "y": 0.985, "yanchor": "top"},
        legend={"orientation": "h", "y": -0.25, "font": {"size": 10}},
        updatemenus=[{"buttons": buttons, "x": 0.99, "xanchor": "right", "y": 1.13, "yanchor": "top",
                      "showactive": True}])
    view = [max(-0.5, n - VIEW - 0.5), n - 0.5]
    fig.update_xaxes(tickvals=list(range(n)), ticktext=ticks, tickangle=-60, tickfont={"size": 9}, range=view)
    fig.update_xaxes(rangeslider={"visible": True, "thickness": 0.05, "range": [-0.5, n - 0.5]}, row=2, col=1)
    return fig


def page(title, series, shas, dates, url, report, exports):
    """The whole page as text: the figure, the changes table and the export links."""
    fig = figure(series, shas, dates, url)
    click = ("var gd = document.getElementsByClassName('plotly-graph-div')[0];"
             "gd.on('plotly_click', function (d) { var u = d.points[0].customdata; if (u) window.open(u, '_blank'); });"
             "document.body.setAttribute('data-page-width', document.body.scrollWidth);"
             "document.body.setAttribute('data-plot-width', Math.round(gd.getBoundingClientRect().width));"
             "document.body.setAttribute('data-plot', 'drawn');")
    plot = fig.to_html(include_plotlyjs=True, full_html=False, post_script=click,
                       config={"displaylogo": False, "responsive": False})
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{n}</td><td>"
                   + ("<br>".join(html.escape(x) for x in lines) if lines else "no change") + "</td></tr>"
                   for name, n, lines in report)
    links = " ".join(f'<a download="{html.escape(name)}" href="data:application/json;charset=utf-8,'
                     f'{html.escape(json.dumps(data))}">{html.escape(name)}</a>' for name, data in exports)
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>ptdp throughput history</title>"
            f"<style>body {{ width: {WIDTH}px; margin: 8px; font-family: sans-serif; font-size: 13px; }}"
            " table { width: 100%; table-layout: fixed; border-collapse: collapse; }"
            " td, th { border: 1px solid #ccc; padding: 4px; overflow-wrap: anywhere; vertical-align: top; }"
            " th:nth-child(1) { width: 22%; } th:nth-child(2) { width: 6%; }</style></head><body>"
            f"<h1 style='font-size: 18px; margin: 4px 0'>Throughput history: {html.escape(title)}</h1>"
            f"{plot}<h2 style='font-size: 15px'>Changes and alerts</h2>"
            f"<table><tr><th>series</th><th>builds</th><th>changes</th></tr>{rows}</table>"
            f"<p>Export (the newest build; plots/history.py --bmf, --asv for every build): {links}</p>"
            "</body></html>\n")
