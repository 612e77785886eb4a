from synclab.report.timeline import plot_timeline


def test_timeline_png_from_events(tmp_path):
    rows = ["iteration,node,tensor,event,time_s"]
    for it in (1, 2):
        for k, t in enumerate(("fc.bias", "fc.weight", "conv.weight")):
            base = it + k * 0.01
            rows += [f"{it},worker0,{t},grad_ready,{base}", f"{it},worker0,{t},send_start,{base + 0.001}",
                     f"{it},worker0,{t},send_end,{base + 0.004}", f"{it},worker0,{t},params_fresh,{base + 0.005}"]
    (tmp_path / "events.csv").write_text("\n".join(rows) + "\n")
    out = plot_timeline(tmp_path, tmp_path / "timeline.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert plot_timeline(tmp_path, tmp_path / "x.png", node="worker9") is None
