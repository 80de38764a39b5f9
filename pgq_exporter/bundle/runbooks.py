"""The runbooks: docs/runbooks.md (every alert, confirmed and acted on for the reference
queue) and docs/runbooks/<preset>.md per library, whose confirmations are the preset's
own queries, those the exporter runs, written out for one queue, and whose remedies
are the library's own tools (its declaration's remedies)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

import jinja2
from psycopg import sql

from pgq_exporter.bundle.alerts import ALERTS, Alert, Series, way_for
from pgq_exporter.bundle.presets import served_by_preset
from pgq_exporter.bundle.promql import number
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.collectors.library_sql import render_block
from pgq_exporter.presets.library import CAPPED, LIBRARY_PRESETS, LibraryLayout, LibraryPreset
from pgq_exporter.sql import query

# A library's queue alerts: what confirms each (the preset's blocks, in order, with what
# each shows) and which of its remedies acts on it.
CONFIRMS: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {
    "PgqBacklogTooLarge": ((("depth", "the queue's jobs by state"),), "workers"),
    "PgqOldestReadyJobTooOld": ((("oldest_ready", "the age of its oldest ready job"),),
                                "workers"),
    "PgqQueueStalled": ((("depth", "the queue's jobs by state"),
                         ("finished", "how many jobs it finished in the last hour, and when "
                          "the last one finished")), "workers"),
    "PgqStuckJobs": ((("stuck", "its jobs abandoned by the library's own rule"),), "stuck"),
    "PgqExhaustedJobsPiling": ((("stuck", "its abandoned jobs, and those with no attempt "
                                 "left"),), "stuck"),
    "PgqFailureRatioHigh": ((("finished", "the jobs it finished in the last hour, how "
                              "many failed, and the failure ratio"),), "failed"),
    "PgqQueueHasNoWorkers": ((("workers", "its live workers by queue, by its own rule"),),
                             "workers"),
    "PgqPeriodicTaskLate": ((("periodic", "its periodic tasks, their last runs and due "
                              "times"),), "periodic"),
}  # fmt: skip
# {queues} and {since} as a runbook writes them out; the caps are NULL (no limit).
QUEUE = "QUEUE"
SINCE = sql.SQL("extract(epoch FROM now() - interval '1 hour')")


@dataclass(frozen=True, slots=True)
class Query:
    what: str
    sql: str


def _environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: files("pgq_exporter.bundle").joinpath("templates", name).read_text("utf-8")
    )
    return jinja2.Environment(loader=loader, autoescape=False, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)  # fmt: skip


def confirm_query(preset: LibraryPreset, block: str, queue: str = QUEUE) -> str:
    """A preset's block as a runbook writes it: for ``queue``, in the library's default
    schema, with its default parameters and no cap."""
    layout = LibraryLayout(preset, preset.schema, preset.defaults)
    per_queue = queue if preset.per_queue else None
    queues = sql.SQL("ARRAY[{}]").format(sql.Literal(queue))
    statement = render_block(layout, block, per_queue, caps=dict.fromkeys(CAPPED),
                             queues=queues, since=SINCE)  # fmt: skip
    text = _without_comments(statement.as_string())
    if block == "finished":  # one row per job and every queue's: summed up for the queue
        summary = sql.SQL(_without_comments(query("runbooks.sql", "finished_summary")))
        text = summary.format(finished=sql.SQL(text.rstrip(";")),
                              queue=sql.Literal(queue)).as_string()  # fmt: skip
    return text


def _without_comments(text: str) -> str:
    lines = text.strip().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--"))


def runbooks_markdown(config: BundleConfig) -> str:
    """docs/runbooks.md."""
    alerts = []
    by_preset = served_by_preset()
    for alert in ALERTS:
        setting = config.setting(alert.name)
        blind = (
            f". While the exporter, the database or the collector cannot be read, it holds "
            f"on the values last seen within {config.blind_memory}, so nothing resolves while "
            f"blind; once read again, it resolves {config.keep_firing_for} after the fault is "
            f"gone:"
            if alert.keep_firing
            else ":"
        )
        libraries = ""
        if alert.name in CONFIRMS:
            links = [f"[{name}](runbooks/{name}.md#{alert.anchor})"
                     for name in LIBRARY_PRESETS
                     if way_for(alert, config, by_preset[name]) is not None]  # fmt: skip
            libraries = " · ".join(links)
        alerts.append({
            "name": alert.name, "severity": alert.severity, "for_": setting.for_,
            "blind": blind, "expr": alert.expr(config, number(setting.threshold), Series()),
            "meaning": alert.meaning, "confirm_sql": alert.confirm_sql, "action": alert.action,
            "libraries": libraries,
        })  # fmt: skip
    presets = list(LIBRARY_PRESETS.values())
    return _environment().get_template("runbooks.md.j2").render(alerts=alerts, presets=presets)


def preset_runbook(preset: LibraryPreset, config: BundleConfig) -> str:
    """docs/runbooks/<preset>.md."""
    served = served_by_preset()[preset.name]
    alerts, unavailable = [], []
    for alert in ALERTS:
        if alert.name not in CONFIRMS:
            continue
        confirms, remedy = CONFIRMS[alert.name]
        if remedy not in preset.remedies:  # it records nothing the alert reads
            continue
        way = way_for(alert, config, served)
        if way is None:
            unavailable.append(f'{alert.name}: see docs/presets.md, "Alerts by preset".')
            continue
        queries = [Query(what, confirm_query(preset, block))
                   for block, what in confirms if block in preset.blocks]  # fmt: skip
        alerts.append({"name": alert.name, "how": _how(alert, way.name),
                       "queries": queries, "remedy": preset.remedies[remedy]})  # fmt: skip
    return _environment().get_template("preset_runbook.md.j2").render(
        name=preset.name, title=preset.title, schema=preset.schema, alerts=alerts,
        unavailable=unavailable,
    )  # fmt: skip


def _how(alert: Alert, way: str) -> str:
    return alert.summary + ("" if way == "yes" else f" For this library: {way}.")


def runbook_files(config: BundleConfig) -> dict[str, str]:
    files_ = {"docs/runbooks.md": runbooks_markdown(config)}
    for preset in LIBRARY_PRESETS.values():
        files_[f"docs/runbooks/{preset.name}.md"] = preset_runbook(preset, config)
    return files_
