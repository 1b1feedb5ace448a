"""The report as one static HTML page: standard library only, everything inline.

The page has no script and loads nothing: its styles are in a `<style>` element, its figures
are PNG `data:` URIs, and a Content-Security-Policy (`default-src 'none'`) keeps a browser
from fetching anything even if a value in the data looked like markup (every value is
escaped). Headings go h1 (the title), h2 (the sections), h3 and h4 without skipping a level,
and every image has alt text that says what it shows.

The standard library is enough here: the page is a handful of tables and figures, and
`html.escape` is the one thing a template engine would add that matters (Jinja2's
autoescape), so trajkit needs no template dependency.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trajkit.report._figures as _figures
from trajkit._base.version import __version__
from trajkit._core import tree as _tree
from trajkit._io.filecheck import FileCheck
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._io.remote import is_url
from trajkit._models.rollout import FIELD_DIMS, MODEL_OUTPUT_DIMS
from trajkit.lint.registry import CHECKS, Finding
from trajkit.report._collect import Collection
from trajkit.report._figures import Picture
from trajkit.report._lint import Findings
from trajkit.report._profile import FRAME_ROWS
from trajkit.report._sources import Inputs
from trajkit.report._views import View

__all__ = ["SECTIONS", "Page", "render"]

SECTIONS = (
    ("overview", "Overview"),
    ("schema", "Schema"),
    ("checks", "Validation and lint"),
    ("distributions", "Distributions"),
    ("episodes", "Episodes"),
)
"""The page's sections: (id, heading), in order."""

_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Page:
    """Everything the page shows.

    Attributes:
        title: The page's title (its h1).
        inputs: The sources and how the page names their files.
        collection: The files' profiles, folded.
        findings: Lint's findings.
        views: The episodes shown.
        generated: When the report was made (shown in the footer).
        folder: The folder the page is written to (links to files are relative to it), or
            `None` for absolute `file:` links.
    """

    title: str
    inputs: Inputs
    collection: Collection
    findings: Findings
    views: list[View]
    generated: str
    folder: str | None


def _e(value: object) -> str:
    """`value` as text safe in HTML: escaped, undecodable bytes and controls shown as escapes."""
    text = str(value).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return html.escape(text, quote=True)


def _n(value: float) -> str:
    """A count with thousands separators, or a number to four significant digits."""
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "n/a"
    return f"{value:,.4g}"


def render(page: Page) -> str:
    """The HTML of the report."""
    body = "\n".join(
        [
            _header(page),
            _nav(),
            "<main>",
            _overview(page),
            _schema(page),
            _checks(page),
            _distributions(page),
            _episodes(page),
            "</main>",
            _footer(page),
        ]
    )
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">\n"
        f'<meta name="generator" content="trajkit {_e(__version__)}">\n'
        f"<title>{_e(page.title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


# ------------------------------------------------------------------------------ frame


def _verdict(page: Page) -> tuple[bool, str]:
    c, f = page.collection, page.findings
    tally = f.tally.counts
    problems = []
    if c.invalid:
        problems.append(f"{_n(c.invalid)} invalid file{'s' * (c.invalid != 1)}")
    for severity in ("error", "warning"):
        if tally[severity]:
            problems.append(f"{_n(tally[severity])} lint {severity}{'s' * (tally[severity] != 1)}")
    if f.failed:
        problems.append(f"lint failed on {_n(f.failed)} file{'s' * (f.failed != 1)}")
    if problems:
        return False, "Needs attention: " + ", ".join(problems) + "."
    notes = f" ({_n(tally['note'])} note{'s' * (tally['note'] != 1)})" if tally["note"] else ""
    files = "The file is" if c.files == 1 else f"All {_n(c.files)} files are"
    return True, f"{files} valid and lint found no problem{notes}."


def _header(page: Page) -> str:
    ok, verdict = _verdict(page)
    sources = ", ".join(f"<code>{_e(s)}</code>" for s in page.inputs.described) or "nothing"
    mark = "✔" if ok else "✖"
    return (
        f"<header>\n<h1>{_e(page.title)}</h1>\n"
        f'<p class="lead">A report of {sources}, made by trajkit {_e(__version__)}.</p>\n'
        f'<p class="verdict {"ok" if ok else "bad"}" role="status">'
        f'<span aria-hidden="true">{mark}</span> <a href="#checks">{_e(verdict)}</a></p>\n'
        "</header>"
    )


def _nav() -> str:
    links = "".join(f'<li><a href="#{key}">{_e(name)}</a></li>' for key, name in SECTIONS)
    return f'<nav aria-label="Sections"><ul>{links}</ul></nav>'


def _footer(page: Page) -> str:
    return (
        f"<footer>Made by <code>trajkit report</code> (trajkit {_e(__version__)}) on "
        f"{_e(page.generated)}. This page loads nothing from the network.</footer>"
    )


def _section(key: str, content: Iterable[str]) -> str:
    heading = dict(SECTIONS)[key]
    inner = "\n".join(content)
    return (
        f'<section id="{key}" aria-labelledby="{key}-h">\n'
        f'<h2 id="{key}-h">{_e(heading)}</h2>\n{inner}\n</section>'
    )


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], caption: str | None = None) -> str:
    """A table; the cells are HTML already (escape values with `_e`)."""
    top = "".join(f'<th scope="col">{h}</th>' for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>\n" for row in rows)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return (
        f'<div class="scroll"><table>{cap}<thead><tr>{top}</tr></thead>'
        f"<tbody>\n{body}</tbody></table></div>"
    )


def _figure(picture: Picture | None, caption: str = "") -> str:
    if picture is None:
        return ""
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return (
        f'<figure><img src="{picture.uri}" width="{picture.width}" height="{picture.height}" '
        f'alt="{_e(picture.alt)}">{cap}</figure>'
    )


def _link(page: Page, path: str) -> str:
    """The file's name on the page, linked to the file where it is a local one."""
    label = _e(page.inputs.label(path))
    target = page.inputs.origin(path)
    if is_url(target) or target.startswith("minari:") or not os.path.exists(target):
        return f"<code>{label}</code>"
    absolute = os.path.abspath(target)
    if page.folder is not None:
        href = Path(os.path.relpath(absolute, page.folder)).as_posix()
        href = "/".join(_quote(part) for part in href.split("/"))
    else:
        href = Path(absolute).as_uri()
    return f'<a href="{_e(href)}"><code>{label}</code></a>'


def _quote(part: str) -> str:
    from urllib.parse import quote

    return quote(part.encode("utf-8", "surrogateescape"), safe="")


# --------------------------------------------------------------------------- overview


def _overview(page: Page) -> str:
    c = page.collection
    s = c.stats
    cards = [
        ("files", _n(c.files), f"{_n(c.files - c.invalid)} valid, {_n(c.invalid)} invalid"),
        ("rollouts", _n(c.files - c.invalid), "one per valid file"),
        ("steps", _n(s.steps), "T times B, summed over the rollouts"),
        (
            "episode ends",
            _n(s.episodes),
            f"{_n(s.terminations)} terminations, {_n(s.truncations)} truncations",
        ),
        ("complete episodes", _n(s.returns.count), "start and end inside one rollout"),
        ("size", _size(s.nbytes), "on disk"),
    ]
    items = "".join(
        f'<div class="card"><dt>{_e(name)}</dt><dd><strong>{value}</strong>'
        f"<span>{_e(note)}</span></dd></div>"
        for name, value, note in cards
    )
    rows = [
        ("Episode return", s.returns),
        ("Episode length (steps)", s.lengths),
        ("Reward per step", c.reward_moments),
    ]
    table = _table(
        ["", "count", "mean", "std", "min", "max"],
        [[_e(name), _n(m.count), _n(m.mean), _n(m.std), _n(m.min), _n(m.max)] for name, m in rows],
    )
    return _section("overview", [f'<dl class="cards">{items}</dl>', table])


def _size(nbytes: float) -> str:
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while nbytes >= 1024 and power < len(units) - 1:
        nbytes /= 1024
        power += 1
    return f"{int(nbytes):,} bytes" if power == 0 else f"{nbytes:,.1f} {units[power]}"


# ----------------------------------------------------------------------------- schema


def _schema(page: Page) -> str:
    c = page.collection
    meta = c.metadata
    parts: list[str] = []
    if meta is None:
        parts.append("<p>No valid file: there is no schema to show.</p>")
    else:
        parts += _fields(meta, _link(page, c.first_path or ""))
        parts += _spaces(meta)
        parts += _recording(page, meta)
    parts += _files_facts(page)
    for note in page.inputs.notes:
        parts.append(f"<h3>{_e(note['kind'])} <code>{_e(note['source'])}</code></h3>")
        parts.append(_pairs({k: v for k, v in note.items() if k not in ("kind", "source")}))
    return _section("schema", parts)


def _fields(meta: RolloutFileMetadata, link: str) -> list[str]:
    rows = []
    for member in meta.arrays():
        if member.key is not None:
            name = f"model_outs[{member.key!r}]"
            dims = MODEL_OUTPUT_DIMS.get(member.key, MODEL_OUTPUT_DIMS["*"])
        else:
            name = _tree.format_path(member.field, member.path or ())
            dims = FIELD_DIMS[member.field]
        lead = min(len(member.shape), 1 if member.field == "final_obses" else 2)
        step = member.shape[lead:]
        rows.append(
            [
                f"<code>{_e(name)}</code>",
                f"<code>{_e(member.dtype)}</code>",
                f"<code>{_e(dims)}</code>",
                _e(_shape(step)),
                _e(_shape(member.shape)),
            ]
        )
    spec = meta.spec
    flags = [
        f"format version {meta.format_version}",
        f"truncations {'recorded' if spec.has_truncation else 'not recorded'}",
        f"true final observations {'kept' if meta.num_final_obses is not None else 'not kept'}",
        f"model outputs: {', '.join(meta.model_output_keys) or 'none'}",
    ]
    return [
        "<h3>Fields and leaves</h3>",
        f"<p>As in the first valid file, {link} (T = {_n(meta.num_steps)}, B = "
        f"{_n(meta.batch_size)}): {_e('; '.join(flags))}.</p>",
        _table(["field or leaf", "dtype", "dimensions", "per step", "shape in that file"], rows),
    ]


def _code(text: str) -> str:
    return f"<code>{_e(text)}</code>"


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _spaces(meta: RolloutFileMetadata) -> list[str]:
    recording = meta.recording
    if recording is None or (
        recording.observation_space is None and recording.action_space is None
    ):
        return ["<h3>Spaces</h3>", "<p>The files do not record their spaces.</p>"]
    out = ["<h3>Spaces</h3>"]
    for name, space in (
        ("Observation space", recording.observation_space),
        ("Action space", recording.action_space),
    ):
        if space is not None:
            out.append(f"<p><strong>{name}</strong>: {_e(_space(space))}</p>")
            out.append(
                f"<details><summary>{name} as recorded (JSON)</summary>"
                f"<pre>{_e(json.dumps(space, indent=2))}</pre></details>"
            )
    return out


def _space(space: Any) -> str:
    """A space as Gymnasium prints it, from its JSON description (`None` bounds are inf)."""
    kind = space.get("type", "?")
    if kind == "Box":
        low, high = _bound(space.get("low"), "-inf"), _bound(space.get("high"), "inf")
        return f"Box({low}, {high}, {_shape(space.get('shape', ()))}, {space.get('dtype')})"
    if kind == "Discrete":
        start = space.get("start", 0)
        return f"Discrete({space.get('n')}" + (f", start={start})" if start else ")")
    if kind == "MultiDiscrete":
        start = space.get("start")
        shown = f", start={start}" if start and any(_flat(start)) else ""
        return f"MultiDiscrete({space.get('nvec')}{shown})"
    if kind == "MultiBinary":
        return f"MultiBinary({space.get('n')})"
    if kind in ("Dict", "Tuple"):
        inner = space.get("spaces", {})
        items = inner.items() if isinstance(inner, dict) else enumerate(inner)
        return f"{kind}(" + ", ".join(f"{k}: {_space(v)}" for k, v in items) + ")"
    return str(kind)


def _bound(value: Any, infinite: str) -> str:
    """A Box bound, numbers to 6 significant digits, `None` (an infinite bound) as `infinite`."""
    if isinstance(value, list):
        return "[" + ", ".join(_bound(v, infinite) for v in value) + "]"
    if value is None:
        return infinite
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _flat(value: Any) -> list[Any]:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def _recording(page: Page, meta: RolloutFileMetadata) -> list[str]:
    c = page.collection
    out = ["<h3>Recording</h3>"]
    recording = meta.recording
    if recording is None:
        out.append(
            "<p>The first valid file names no recording (no env id, seed or time limit).</p>"
        )
        return out
    facts = recording.model_dump(mode="json", exclude={"observation_space", "action_space"})
    out.append(_pairs(facts))
    recorded = sum(c.recordings.values())
    out.append(
        f"<p>{_n(recorded)} of {_n(c.files - c.invalid)} valid files name a recording: "
        f"{_n(len(c.recordings))} distinct recording{'s' * (len(c.recordings) != 1)} of "
        + ", ".join(f"{_code(env)} ({_n(n)} files)" for env, n in c.envs.most_common(10))
        + ".</p>"
    )
    return out


def _pairs(facts: dict[str, Any]) -> str:
    rows = "".join(
        f"<div><dt>{_e(key)}</dt><dd>{_e(_fact(value))}</dd></div>"
        for key, value in facts.items()
        if value not in (None, "", [], {})
    )
    return f'<dl class="pairs">{rows}</dl>'


def _fact(value: Any) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _files_facts(page: Page) -> list[str]:
    c = page.collection
    if c.files == c.invalid:
        return []
    facts = {
        "format versions": _counted(c.versions),
        "T (steps per rollout)": _counted(c.num_steps),
        "B (envs per rollout)": _counted(c.batch_sizes),
    }
    out = ["<h3>Across the files</h3>", _pairs(facts)]
    if c.other_schema_count:
        listed = "".join(f"<li>{_link(page, p)}</li>" for p in c.other_schema)
        more = c.other_schema_count - len(c.other_schema)
        out.append(
            f'<p class="warn">{_n(c.other_schema_count)} valid files have another schema than '
            f"the first (fields, leaves, dtypes or shapes):</p><ul>{listed}</ul>"
            + (f"<p>and {_n(more)} more.</p>" if more > 0 else "")
        )
    else:
        out.append("<p>Every valid file has the schema above.</p>")
    for name, count in sorted(c.mismatched.items()):
        out.append(
            f'<p class="warn">{_code(name)} differs in {_n(count)} files: their statistics '
            "are left out below.</p>"
        )
    return out


def _counted(counter: Counter[int]) -> str:
    most = counter.most_common(8)
    text = ", ".join(f"{value:,} ({n:,} files)" for value, n in sorted(most))
    return text + (f", and {len(counter) - 8} more" if len(counter) > 8 else "")


# ----------------------------------------------------------------------------- checks


def _checks(page: Page) -> str:
    return _section("checks", [*_validation(page), *_lint(page)])


def _validation(page: Page) -> list[str]:
    c = page.collection
    out = ["<h3>Validation</h3>"]
    spec = _e(" and conformance to the dataset's spec") if page.inputs.spec is not None else ""
    out.append(
        f"<p>What <code>trajkit validate</code> checks (the file, every array and rule, every "
        f"CRC-32{spec}): {_n(c.files - c.invalid)} of {_n(c.files)} files are valid.</p>"
    )
    if c.refused:
        rows = [[_link(page, check.path), _problems(check)] for check in c.refused]
        out.append(
            _table(
                ["file", "problem"],
                rows,
                caption=f"{_n(c.invalid)} invalid file{'s' * (c.invalid != 1)}",
            )
        )
        if c.invalid > len(c.refused):
            out.append(f"<p>and {_n(c.invalid - len(c.refused))} more invalid files.</p>")
    return out


def _problems(check: FileCheck) -> str:
    return "<br>".join(_e(problem) for problem in check.problems)


def _lint(page: Page) -> list[str]:
    f = page.findings
    out = ["<h3>Lint</h3>"]
    selected = len(f.options.codes) if f.options is not None else 0
    out.append(
        f"<p>What <code>trajkit lint</code> finds ({_n(selected)} checks run): "
        f"{_e(f.tally.summary(f.files))}</p>"
    )
    if f.failed:
        listed = "".join(f"<li>{_e(failure)}</li>" for failure in f.failures)
        out.append(
            f'<p class="warn">A check stopped with an internal error (please report it) on '
            f"{_n(f.failed)} file{'s' * (f.failed != 1)}, whose other checks are left out:</p>"
            f"<ul>{listed}</ul>"
        )
    if not f.counts:
        return out
    summary = [
        [
            f'<a href="#{_e(code)}">{_e(code)}</a>',
            _e(CHECKS[code].name) if code in CHECKS else "",
            _badge(_severity(code)),
            _n(f.counts[code]),
        ]
        for code in sorted(f.counts)
    ]
    out.append(_table(["code", "check", "severity", "findings"], summary))
    for code in sorted(f.by_code):
        out += _code_group(page, code, f.by_code[code], f.counts[code])
    return out


def _severity(code: str) -> str:
    return CHECKS[code].severity if code in CHECKS else "note"


def _badge(severity: str) -> str:
    return f'<span class="badge {_e(severity)}">{_e(severity)}</span>'


def _code_group(page: Page, code: str, findings: list[Finding], count: int) -> list[str]:
    check = CHECKS.get(code)
    name = f" {_e(check.name)}" if check else ""
    out = [f'<h4 id="{_e(code)}">{_e(code)}{name} {_badge(_severity(code))}</h4>']
    if check is not None:
        out.append(f"<p>{_e(check.summary[:1].upper() + check.summary[1:])}.</p>")
    rows = [
        [
            _link(page, finding.path) if finding.path else "(the dataset)",
            "" if finding.env is None else _n(finding.env),
            "" if finding.step is None else _n(finding.step),
            _e(finding.message),
        ]
        for finding in findings
    ]
    out.append(_table(["file", "env", "step", "finding"], rows))
    if count > len(findings):
        out.append(f"<p>and {_n(count - len(findings))} more {_e(code)} findings.</p>")
    return out


# ---------------------------------------------------------------------- distributions


def _distributions(page: Page) -> str:
    c = page.collection
    out = ["<h3>Episode returns and lengths</h3>"]
    episodes = _figures.episode_picture(c)
    out.append(
        _figure(
            episodes,
            "Complete episodes (those that start and end inside one rollout); dashed: the median.",
        )
        if episodes
        else "<p>No episode starts and ends inside one rollout.</p>"
    )
    out.append("<h3>Rewards</h3>")
    rewards = _figures.reward_picture(c)
    out.append(
        _figure(rewards, "Every step's reward (a uniform sample of them where there are more).")
        if rewards
        else "<p>No steps.</p>"
    )
    out.append("<h3>Actions</h3>")
    actions = c.actions
    if actions is None:
        out.append("<p>The files record no actions (<code>model_outs['actions']</code>).</p>")
    else:
        kind = "counted per value" if actions.counts is not None else "a uniform sample"
        more = f" (the first 12 of {actions.dims} dimensions)" if actions.dims > 12 else ""
        out.append(
            f"<p><code>model_outs['actions']</code>: <code>{_e(actions.dtype)}</code>, per step "
            f"{_e(_shape(actions.shape))}, {kind}{more}.</p>"
        )
        out.append(_figure(_figures.action_picture(actions)))
    out.append("<h3>Observations</h3>")
    out += _observations(page)
    return _section("distributions", out)


def _observations(page: Page) -> list[str]:
    leaves = page.collection.leaves
    if not leaves:
        return ["<p>No valid file.</p>"]
    rows = []
    for leaf in leaves.values():
        rows.append(
            [
                _code(leaf.name),
                _code(leaf.dtype),
                _e(_shape(leaf.shape)),
                _e(
                    {
                        "hw": "gray image",
                        "hwc": "image",
                        "chw": "image (channels first)",
                        "nhwc": "stacked images",
                    }.get(leaf.layout or "", "vector" if leaf.unit == "feature" else "array")
                ),
                _n(float(leaf.low.min())) if len(leaf.low) else "",
                _n(float(leaf.high.max())) if len(leaf.high) else "",
                f"{_n(leaf.count)}" + (" sampled" if leaf.sampled else ""),
            ]
        )
    out = [_table(["leaf", "dtype", "per step", "kind", "min", "max", "observations"], rows)]
    for leaf in leaves.values():
        out.append(f"<h4>{_e(leaf.name)}</h4>")
        unit = {
            "feature": "feature",
            "channel": "channel (over every pixel)",
            "value": "leaf (all its values together)",
        }[leaf.unit]
        how = f"from {_n(leaf.count)} observations" + (
            f", drawn at random (at most {FRAME_ROWS} per file)" if leaf.sampled else ""
        )
        most = _figures.MAX_FEATURES_DRAWN
        more = f"; the first {most} of {len(leaf.low)} are drawn" if len(leaf.low) > most else ""
        out.append(f"<p>Range, mean and standard deviation per {unit}, {how}{more}.</p>")
        out.append(_figure(_figures.leaf_picture(leaf)))
    return out


# --------------------------------------------------------------------------- episodes


def _episodes(page: Page) -> str:
    out = [
        "<p>The episodes with the best, the median and the worst return (the median among "
        "sampled episodes), as recorded: frames of image observations, and traces of vector "
        "observations with the reward at each step and the episode's end marked.</p>"
    ]
    if not page.views:
        out.append("<p>No valid file: no episode to show.</p>")
    for view in page.views:
        pick = view.pick
        value = "" if pick.ret != pick.ret else f": {_n(pick.ret)}"
        out.append(f"<h3>{_e(pick.title)}{_e(value)}</h3>")
        out.append(
            f"<p>Env {_n(pick.env)} of {_link(page, pick.path)}, rows {_n(pick.first)} to "
            f"{_n(pick.first + pick.length)}: {_n(pick.length)} steps, {_e(pick.ending)}.</p>"
        )
        where = page.inputs.label(pick.path)
        for name, frames in _figures.frame_pictures(view, where):
            out.append(_strip(name, frames))
        out.append(_figure(_figures.trace_picture(view, where)))
    return _section("episodes", out)


def _strip(name: str, frames: list[tuple[int, Picture]]) -> str:
    """Frames side by side, each with its step; small ones drawn with square pixels."""
    cells = "".join(
        f'<figure class="frame"><img src="{f.uri}" width="{f.width}" height="{f.height}" '
        f'alt="{_e(f.alt)}"{_PIXELATED if f.width < _SMALL_FRAME else ""}>'
        f"<figcaption>step {step}</figcaption></figure>"
        for step, f in frames
    )
    return (
        f'<figure class="strip"><div class="frames">{cells}</div>'
        f"<figcaption>{len(frames)} frames of <code>{_e(name)}</code>, evenly spaced over "
        "the episode.</figcaption></figure>"
    )


_SMALL_FRAME = 200  # CSS pixels: narrower frames are enlarged with square pixels
_PIXELATED = ' class="pixelated"'

_CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dee7;--bg:#ffffff;--soft:#f4f6fa;--accent:#2f5fa7;
--ok:#146c2e;--ok-bg:#e3f4e8;--bad:#9a1c1c;--bad-bg:#fde8e8;--warn:#8a4b00;--warn-bg:#fff1dc;
--note:#1f4f8f;--note-bg:#e5eefb}
*{box-sizing:border-box}
html{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg);line-height:1.5;font-size:15px}
body{margin:0 auto;max-width:1040px;padding:0 24px 48px}
header{padding:28px 0 8px}
h1{font-size:1.9rem;margin:0 0 6px;line-height:1.2}
h2{font-size:1.45rem;margin:40px 0 12px;padding-bottom:6px;border-bottom:2px solid var(--line)}
h3{font-size:1.15rem;margin:28px 0 8px}
h4{font-size:1rem;margin:22px 0 6px}
p{margin:8px 0}
a{color:var(--accent)}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
pre{background:var(--soft);padding:10px 12px;border-radius:6px;overflow:auto;max-height:360px}
.lead{color:var(--muted);margin:0 0 12px}
.verdict{display:inline-block;padding:8px 14px;border-radius:8px;font-weight:600;margin:4px 0}
.verdict.ok{color:var(--ok);background:var(--ok-bg)}
.verdict.bad{color:var(--bad);background:var(--bad-bg)}
.verdict a{color:inherit;text-decoration:none}
.verdict a:hover{text-decoration:underline}
nav{position:sticky;top:0;background:var(--bg);border-bottom:1px solid var(--line);z-index:1}
nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:4px 20px;margin:0;padding:10px 0}
nav a{text-decoration:none;font-weight:600}
nav a:hover,nav a:focus{text-decoration:underline}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(155px,1fr));gap:12px;
margin:12px 0 18px}
.card{background:var(--soft);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.card dt{color:var(--muted);font-size:.82rem;text-transform:uppercase;letter-spacing:.04em}
.card dd{margin:2px 0 0}
.card strong{display:block;font-size:1.45rem}
.card span{color:var(--muted);font-size:.82rem}
.pairs{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:8px 0}
.pairs div{display:contents}
.pairs dt{color:var(--muted)}
.pairs dd{margin:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto;margin:10px 0}
table{border-collapse:collapse;width:100%;font-size:.9rem}
caption{text-align:left;color:var(--muted);padding:4px 0}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:var(--soft);font-weight:600}
tbody tr:nth-child(even){background:#fafbfd}
td{overflow-wrap:break-word}
td a code{white-space:nowrap}
.badge{display:inline-block;border-radius:999px;padding:0 9px;font-size:.78rem;font-weight:600;
vertical-align:middle}
.badge.error{color:var(--bad);background:var(--bad-bg)}
.badge.warning{color:var(--warn);background:var(--warn-bg)}
.badge.note{color:var(--note);background:var(--note-bg)}
.warn{color:var(--warn)}
figure{margin:12px 0 20px}
figure img{max-width:100%;height:auto;display:block;border:1px solid var(--line);border-radius:8px}
figcaption{color:var(--muted);font-size:.85rem;margin-top:4px}
.frames{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:10px 12px;
border:1px solid var(--line);border-radius:8px;padding:12px}
.frame{margin:0;text-align:center}
.frame img{width:100%;height:auto;border:0;border-radius:0}
.frame figcaption{margin-top:2px}
img.pixelated{image-rendering:pixelated}
details{margin:6px 0}
summary{cursor:pointer;color:var(--accent)}
footer{margin-top:48px;padding-top:12px;border-top:1px solid var(--line);color:var(--muted);
font-size:.85rem}
"""
