"""course.yml is the one list of lessons: the nav, the page titles, the lesson files, the labs and the
nine sections of every lesson (templates/lesson.md) agree with it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup
from mkdocs.config import load_config
from mkdocs.exceptions import PluginError

from conftest import ROOT
from infercourse import course, labs
from infercourse.pages import values_for

_spec = importlib.util.spec_from_file_location("course_hook", ROOT / "hooks" / "course.py")
course_hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course_hook)

LIVE = course.live_lessons()
DOCS = ROOT / "docs"

SECTIONS = (
    ("intuition", "Intuition & why it matters"),
    ("mental-model", "Mental model"),
    ("principle", "Principle & math"),
    ("code", "Complete runnable code + line-by-line"),
    ("lab", "Lab"),
    ("pitfalls", "Pitfalls"),
    ("interview", "Interview links"),
    ("summary", "Summary & further reading"),
    ("self-check", "Self-check"),
)
"""The nine sections, as a lesson writes them: ``## 5 · Lab: <what it measures> { #lab }``."""
SECTION = re.compile(r"^## (\d) · (.+?) \{ #([a-z-]+) \}\s*$")


def outside_fences(text: str) -> list[str]:
    """The Markdown lines that are not inside a ``` or ~~~ fenced block."""
    lines, fence = [], None
    for line in text.splitlines():
        marker = line.lstrip()[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
        elif fence is not None and marker == fence:
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def section_problems(text: str) -> list[str]:
    """What is wrong with a lesson's nine sections (none when all nine are there, in order, once)."""
    found = [m.groups() for line in outside_fences(text) if (m := SECTION.match(line))]
    ids = [section_id for _, _, section_id in found]
    want = [section_id for section_id, _ in SECTIONS]
    if ids != want:
        return [f"sections (ids) are {ids}, want {want}"]
    problems = []
    for (number, title, section_id), (n, (_, want_title)) in zip(found, enumerate(SECTIONS, 1), strict=True):
        if number != str(n):
            problems.append(f"#{section_id} is numbered {number}, want {n}")
        if not (title == want_title or (section_id == "lab" and title.startswith("Lab: "))):
            problems.append(f"#{section_id} is titled {title!r}, want {want_title!r}")
    return problems


# --- the nav ------------------------------------------------------------------------------------------


def test_the_nav_lists_every_live_lesson_from_course_yml_once_under_its_part():
    nav = course_hook.on_config(load_config(str(ROOT / "mkdocs.yml"))).nav
    built = {
        part: entries
        for item in nav
        if isinstance(item, dict)
        for part, entries in item.items()
        if isinstance(entries, list)
    }
    for part in course.parts():
        live = [lesson for lesson in part["lessons"] if lesson["page"]]
        if not live:
            assert part["part"] not in built, f"{part['part']} has no live lesson but is in the nav"
            continue
        assert built[part["part"]] == [{f"{lesson['code']} · {lesson['title']}": lesson["page"]} for lesson in live]


def test_mkdocs_yml_names_no_lesson_itself():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:\n") : text.index("\n# ---", text.index("\nnav:\n"))]
    assert "lessons/" not in nav, "a lesson is in mkdocs.yml's nav: lessons are listed in src/infercourse/course.yml"
    assert f"- {course_hook.PLACEHOLDER}\n" in nav


def test_the_hook_refuses_a_nav_without_the_placeholder():
    config = load_config(str(ROOT / "mkdocs.yml"))
    config.nav = [{"Home": "index.md"}]
    with pytest.raises(PluginError, match="course.yml"):
        course_hook.on_config(config)


# --- the lesson files -------------------------------------------------------------------------------


def test_every_lesson_file_is_live_in_course_yml_and_back():
    files = {p.relative_to(DOCS).as_posix() for p in (DOCS / "lessons").glob("*.md")}
    assert files == {lesson["page"] for lesson in LIVE}


@pytest.mark.parametrize("lesson", LIVE, ids=lambda lesson: lesson["code"])
def test_a_lesson_page_has_no_title_of_its_own(lesson):
    text = (DOCS / lesson["page"]).read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else {}
    assert "title" not in (front or {}), f"{lesson['page']}: remove 'title:'; course.yml has the title"
    h1 = [line for line in outside_fences(text) if line.startswith("# ")]
    assert not h1, f"{lesson['page']}: remove {h1[0]!r}; the page heading is course.yml's title"


@pytest.mark.parametrize("lesson", LIVE, ids=lambda lesson: lesson["code"])
def test_a_lesson_has_the_nine_sections_in_order(lesson):
    assert section_problems((DOCS / lesson["page"]).read_text(encoding="utf-8")) == []


def test_the_template_has_the_nine_sections():
    assert section_problems((ROOT / "templates" / "lesson.md").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "text, says",
    [
        ("## 1 · Intuition & why it matters { #intuition }\n", "sections (ids)"),  # eight missing
        ("\n".join(f"## {n} · {t} {{ #{i} }}" for n, (i, t) in enumerate(reversed(SECTIONS), 1)), "sections (ids)"),
        (
            "\n".join(
                f"## {n} · {'Pitfall' if i == 'pitfalls' else t}{': x' if i == 'lab' else ''} {{ #{i} }}"
                for n, (i, t) in enumerate(SECTIONS, 1)
            ),
            "#pitfalls is titled 'Pitfall'",
        ),
        (
            "\n".join(
                f"## {n + (i == 'code')} · {t}{': x' if i == 'lab' else ''} {{ #{i} }}"
                for n, (i, t) in enumerate(SECTIONS, 1)
            ),
            "#code is numbered 5",
        ),
    ],
)
def test_the_section_check_sees_a_broken_lesson(text, says):
    assert any(says in problem for problem in section_problems(text))


# --- the code ---------------------------------------------------------------------------------------


INCLUDE = re.compile(r'^\s*--8<-- "([\w/.-]+)"\s*$')
"""A pymdownx.snippets line that includes a whole file (a section reads ``"file.py:name"``)."""


def whole_listings(text: str) -> list[str]:
    """The files a page shows whole: each included without a section in a fenced block that is shown, not run
    (an ``exec="on"`` block runs the whole file and shows only what it prints)."""
    found, fence, shown = [], None, False
    for line in text.splitlines():
        marker = line.lstrip()[:3]
        if fence is None and marker in ("```", "~~~"):
            fence, shown = marker, 'exec="on"' not in line
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is not None and shown and (m := INCLUDE.match(line)):
            found.append(m.group(1))
    return found


@pytest.mark.parametrize("lesson", LIVE, ids=lambda lesson: lesson["code"])
def test_a_lesson_shows_its_snippet_in_excerpts_and_no_file_whole(lesson):
    text = (DOCS / lesson["page"]).read_text(encoding="utf-8")
    assert lesson["snippet"] and (ROOT / "snippets" / lesson["snippet"]).is_file(), (
        f"course.yml: {lesson['code']} names no snippet file under snippets/"
    )
    assert "{{ code }}" in text, f"{lesson['page']} does not show its snippet's excerpts ({{{{ code }}}})"
    assert not whole_listings(text), f"{lesson['page']} lists whole files: {whole_listings(text)}; show sections"


def test_the_whole_file_check_sees_a_listing_and_not_a_run():
    listed = '```python title="x.py"\n--8<-- "lesson_0a/x.py"\n```\n'
    run = '```python exec="on"\n--8<-- "lesson_0a/x.py"\nmain()\n```\n'
    section = '```python\n--8<-- "lesson_0a/x.py:formulas"\n```\n'
    assert whole_listings(listed + run + section) == ["lesson_0a/x.py"]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LIVE, ids=lambda lesson: lesson["code"])
def test_a_lesson_s_snippet_runs_alone_and_prints(lesson, tmp_path):
    """What the page says: copy the file anywhere and run it (no course package, no network)."""
    copy = tmp_path / Path(lesson["snippet"]).name
    copy.write_bytes((ROOT / "snippets" / lesson["snippet"]).read_bytes())
    run = subprocess.run([sys.executable, copy.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"python {copy.name} failed: {run.stderr[-2000:]}"
    assert run.stdout.strip(), f"python {copy.name} printed nothing (no `if __name__ == '__main__':` call?)"


# --- the labs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lesson", [lesson for lesson in LIVE if lesson["lab"]], ids=lambda lesson: lesson["code"])
def test_a_lesson_s_lab_exists_is_shown_on_its_page_and_its_spec_names_the_lesson(lesson):
    lab = lesson["lab"]
    assert (ROOT / "snippets" / "labs" / f"{lab}.py").is_file(), (
        f"course.yml: {lesson['code']} names no lab script {lab}"
    )
    assert "{{ lab_box }}" in (DOCS / lesson["page"]).read_text(encoding="utf-8"), f"{lesson['page']} shows no lab box"
    box = values_for(lesson["page"])["lab_box"].value
    assert f"GPU lab: `snippets/labs/{lab}.py`" in box, f"{lesson['page']}'s lab box is not for {lab}.py"
    assert labs.spec(lab).lesson == lesson["code"]  # a spec's lesson is course.yml's


def test_every_lab_belongs_to_exactly_one_lesson_of_course_yml(monkeypatch):
    named = [lesson["lab"] for part in course.parts() for lesson in part["lessons"] if lesson["lab"]]
    assert sorted(named) == sorted(labs.SPECS), "course.yml names each wired lab once, and only those"
    monkeypatch.setattr(course, "parts", lambda: [{"lessons": [{"code": "9Z", "lab": "other"}]}])
    with pytest.raises(LookupError, match="course.yml: 0 lessons name lab 'phases'; exactly one must"):
        _ = labs.spec("phases").lesson


# --- the built pages (a build test: marked by its `site` fixture) -----------------------------------


def test_every_lesson_and_lab_has_its_own_test_file():
    """Tests mirror the course: tests/lessons/test_<code>.py per live lesson, tests/labs/test_<lab>.py per lab,
    and no test file there for a lesson or lab course.yml does not have."""
    lessons = {f"test_{lesson['code'].lower()}.py" for lesson in course.live_lessons()}
    lab_files = {f"test_{lab}.py" for lab in labs.wired()}
    have_lessons = {p.name for p in (ROOT / "tests" / "lessons").glob("test_*.py")}
    have_labs = {p.name for p in (ROOT / "tests" / "labs").glob("test_*.py")}
    assert have_lessons == lessons, (
        f"tests/lessons/: missing {sorted(lessons - have_lessons)}, stray {sorted(have_lessons - lessons)}"
    )
    assert have_labs == lab_files, (
        f"tests/labs/: missing {sorted(lab_files - have_labs)}, stray {sorted(have_labs - lab_files)}"
    )


def test_one_lesson_s_tests_are_its_files_and_the_tests_that_name_its_page_or_lab():
    from conftest import lesson_tests

    files, words = lesson_tests("6a")  # case does not matter
    assert files == {ROOT / "tests" / "lessons" / "test_6a.py", ROOT / "tests" / "labs" / "test_spec_decode.py"}
    assert words == {"lessons/6a-speculative-decoding.md", "spec_decode"}
    with pytest.raises(pytest.UsageError, match="no live lesson has that code in course.yml; one of 0A, "):
        lesson_tests("9Z")


def test_a_built_lesson_s_heading_and_title_are_course_yml_s(site: Path):
    for lesson in LIVE:
        soup = BeautifulSoup(
            (site / lesson["page"].removesuffix(".md") / "index.html").read_text(encoding="utf-8"), "html.parser"
        )
        want = f"{lesson['code']} · {lesson['title']}"
        assert [h.get_text(strip=True) for h in soup.find_all("h1")] == [want]
        assert soup.title.get_text().startswith(want + " - ")


# --- the home page's path ------------------------------------------------------------------------


def test_reading_minutes_count_the_prose_only(tmp_path, monkeypatch):
    code = "word " * 500
    page = (
        "---\ntitle: x y z\n---\n"  # front matter: not read
        + "word " * 398  # 398 words of prose
        + "{{ kappa | count }} and\n"  # a value counts as one word: 400
        + f"```python\n{code}\n```\n"  # code: not read
        + "{% for x in y %}<span>one</span>{% endfor %}\n"  # template and tags out, 'one' in: 401
    )
    (tmp_path / "p.md").write_text(page, encoding="utf-8")
    monkeypatch.setattr(course, "DOCS_DIR", tmp_path)
    assert course.reading_minutes("p.md") == 3  # ceil(401 / 200)
    (tmp_path / "p.md").write_text("word " * 400, encoding="utf-8")
    assert course.reading_minutes("p.md") == 2  # exactly 400 / 200


def test_the_home_page_gives_every_live_lesson_its_reading_time_and_its_lab_s_cost():
    from infercourse import labbox

    lessons = [lesson for part in values_for("index.md")["parts"].value for lesson in part["lessons"]]
    live = [lesson for lesson in lessons if lesson["page"]]
    assert [lesson["code"] for lesson in live] == [lesson["code"] for lesson in LIVE]
    assert all(isinstance(lesson["read_min"], int) and 5 <= lesson["read_min"] <= 60 for lesson in live)
    for lesson in (x for x in live if x["lab"]):
        minutes = labbox.lab_minutes(lesson["lab"])["run"]  # the same estimate the lab box and the AutoDL page give
        assert lesson["lab_min"] == minutes and lesson["lab_cny"] == labbox.lab_cny(lesson["lab"], minutes)
