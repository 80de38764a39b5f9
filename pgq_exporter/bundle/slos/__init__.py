"""Queue objectives (SLOs): declared in the bundle config, rendered as recording rules,
multiwindow burn-rate alerts, their promtool tests, and Sloth and Pyrra specs."""
