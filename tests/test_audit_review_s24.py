"""Review of golden-set audits and judge-vs-human calibration (session 24): sheets as Excel leaves them, labels as
pandas and numpy hold them, and golden sets as annotators write them."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ragmeter.errors import InputError
from test_review import fill, human_truth, write_folder


def _exported(tmp_path: Path):
    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")
    manifest = export_sheet(folder, random_n=4, seed=7)
    return folder, manifest


def _rows(sheet: Path):
    with sheet.open(encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows, delimiter: str = ",", tail: str = "", bom: bool = False) -> Path:
    lines = []
    for row in rows:
        cells = ['"' + c.replace('"', '""') + '"' if any(ch in c for ch in delimiter + '"\n') else c for c in row]
        lines.append(delimiter.join(cells))
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + ("\r\n".join(lines) + "\r\n" + tail).encode("utf-8"))
    return path


# ------------------------------------------------------------------------------------------- sheets from Excel


@pytest.mark.parametrize("delimiter", [",", ";"])
def test_empty_rows_excel_leaves_at_the_end_of_a_sheet_are_not_cases(tmp_path: Path, delimiter: str) -> None:
    from ragmeter.review import import_sheet

    folder, manifest = _exported(tmp_path)
    filled = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    blank = delimiter * 5
    sheet = _write(tmp_path / "excel.csv", _rows(filled), delimiter, tail=f"{blank}\r\n{blank}\r\n\r\n", bom=True)
    section = import_sheet(folder, sheet)
    assert section["n"] == 15 and section["n_in_sheet"] == 15 and section["n_incomplete"] == 0
    # an empty row between cases is skipped too; a row with an empty id but a value elsewhere is still an error
    rows = _rows(filled)
    rows.insert(3, [""] * 6)
    assert import_sheet(folder, _write(tmp_path / "gap.csv", rows))["n"] == 15
    rows[3] = ["", "", "", "", "1", ""]
    with pytest.raises(InputError, match=r"gap2\.csv:4: id: empty"):
        import_sheet(folder, _write(tmp_path / "gap2.csv", rows))


def test_empty_unnamed_columns_excel_adds_are_ignored_and_a_value_under_one_is_named(tmp_path: Path) -> None:
    from ragmeter.review import import_sheet

    folder, manifest = _exported(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest)))
    widened = [row + ["", ""] for row in rows]
    assert import_sheet(folder, _write(tmp_path / "wide.csv", widened))["n"] == 15
    widened[5][7] = "see wrong-3"
    with pytest.raises(InputError) as err:
        import_sheet(folder, _write(tmp_path / "wide2.csv", widened))
    assert "wide2.csv:6" in str(err.value) and "column 8" in str(err.value) and "no name" in str(err.value)


@pytest.mark.parametrize("true, false", [("TRUE", "FALSE"), ("True", "False"), ("Yes", "No"), ("1", "0")])
def test_covered_as_excel_booleans_is_read(tmp_path: Path, true: str, false: str) -> None:
    from ragmeter.review import import_sheet

    folder, manifest = _exported(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest)))
    for row in rows[1:]:
        row[4] = true if row[4] == "yes" else false
    section = import_sheet(folder, _write(tmp_path / "bools.csv", rows))
    assert section["n"] == 15 and section["agreement"]["agreed"] == 12


def test_export_keeps_a_sheet_a_reviewer_filled_in_excel(tmp_path: Path) -> None:
    """Saved by Excel where the decimal mark is a comma (';' between fields, a BOM, CRLF): still a reviewer's work."""
    from ragmeter.review import export_sheet

    folder, manifest = _exported(tmp_path)
    sheet = folder / "review" / "review.csv"
    rows = _rows(fill(sheet, tmp_path / "filled.csv", human_truth(manifest)))
    _write(sheet, rows, ";", tail=";;;;;\r\n", bom=True)
    before = sheet.read_bytes()
    with pytest.raises(InputError, match=r"15 of 15 rows are already filled in"):
        export_sheet(folder, random_n=4, seed=8)
    assert sheet.read_bytes() == before


def test_export_keeps_a_review_csv_it_cannot_read_as_a_sheet(tmp_path: Path) -> None:
    from ragmeter.review import export_sheet

    folder, _ = _exported(tmp_path)
    sheet = folder / "review" / "review.csv"
    sheet.write_text("Case,Verdict\nwrong-0,ok\n", encoding="utf-8")  # a reviewer's own notes under that name
    with pytest.raises(InputError, match=r"not a sheet review export writes.*--force"):
        export_sheet(folder, random_n=4, seed=8)
    assert sheet.read_text(encoding="utf-8") == "Case,Verdict\nwrong-0,ok\n"
    sheet.write_text("", encoding="utf-8")  # an empty file holds no work: replaced
    export_sheet(folder, random_n=4, seed=8)
    assert _rows(sheet)[0] == ["id", "point", "key_point", "core", "covered", "note"]


# ------------------------------------------------------------------------------------------- golden-set audit


def _golden(n_multi: int = 4, n_term: int = 6, **extra) -> list:
    rows = []
    for i in range(n_multi + n_term):
        cat = "multi" if i < n_multi else "term"
        rows.append({"id": f"{cat}-{i}", "question": f"Question {i}?", "category": cat, "expectedEvidence": [f"f{i}"],
                     **extra})
    return rows


@pytest.mark.parametrize("blank", [float("nan"), "", "  ", None])
def test_a_difficulty_column_left_empty_does_not_replace_the_hard_categories(tmp_path: Path, blank) -> None:
    """A golden set exported from pandas has difficulty NaN (or '') where nobody filled it in: no label at all."""
    import ragmeter

    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _golden(difficulty=blank)), encoding="utf-8")
    for golden in (path, _golden(difficulty=blank)):
        a = ragmeter.audit(golden)
        assert a.hard["rule"] == "default" and a.hard["n"] == 4, a.hard
        assert "hard_share_low" not in a.codes()


def test_a_difficulty_given_for_some_cases_says_for_how_many(tmp_path: Path) -> None:
    import ragmeter
    from ragmeter.audit import render

    rows = _golden(n_multi=0, n_term=10)
    rows[0]["difficulty"] = "hard"
    rows[1]["difficulty"] = "easy"
    rows[2]["difficulty"] = float("nan")
    a = ragmeter.audit(rows)
    assert a.hard["rule"] == "difficulty" and a.hard["n"] == 1
    assert a.hard["n_difficulty"] == 2 and a.hard["n_total"] == 10
    text = render.plain(a.to_dict())
    assert "difficulty = hard, given for 2/10 cases" in text
    assert "given for 2/10 cases" in next(w.message for w in a.warnings if w.code == "hard_share_low")


# ------------------------------------------------------------------------------------------- calibration API


def test_nan_labels_as_pandas_and_numpy_hold_them_are_missing_not_a_third_label() -> None:
    np = pytest.importorskip("numpy")
    from ragmeter.calibration import agreement, cohen_kappa

    nan = float("nan")
    judge = [1.0, 0.0, 1.0, 0.0, 1.0, nan]
    human = [1.0, 0.0, 1.0, 1.0, nan, 1.0]
    plain = agreement([True, False, True, False], [True, False, True, True])
    for a, b in ((judge, human), (np.array(judge), np.array(human))):
        k = cohen_kappa(a, b)
        assert k.n == 4 and k.n_missing == 2, k
        assert k.value == pytest.approx(plain.kappa.value)
        result = agreement(a, b)
        assert (result.n, result.agreed, result.n_missing) == (4, 3, 2)
        assert result.cells == plain.cells
    pd = pytest.importorskip("pandas")
    a = pd.Series([True, False, True, False, True, None], dtype="boolean")  # pd.NA for the missing label
    b = pd.Series([True, False, True, True, None, True], dtype="boolean")
    result = agreement(a, b)
    assert (result.n, result.n_missing) == (4, 2) and result.cells == plain.cells


def test_ppi_mean_leaves_out_a_random_label_that_is_missing_and_counts_it() -> None:
    from ragmeter.calibration import ppi_mean

    nan = float("nan")
    out = ppi_mean([1, 1, 0, 1], [1, 1, 1], [1, nan, 0])
    assert out["n_labelled"] == 2 and out["n_missing"] == 1
    assert out["value"] == pytest.approx(0.75 - 0.5)
    with pytest.raises(ValueError, match="judge_all"):
        ppi_mean([1, None, 0], [1], [1])


def test_categories_written_several_ways_are_named_as_one_split_in_the_counts() -> None:
    import ragmeter
    from ragmeter.audit import render

    rows = _golden(n_multi=0, n_term=9)
    for row, spelling in zip(rows[5:], ("Term", "term ", "\uff54\uff45\uff52\uff4d", " TERM")):
        row["category"] = spelling
    for i, row in enumerate(rows):
        row["source"] = "DeepSeek" if i == 0 else "deepseek" if i % 2 else "zhipu"
    a = ragmeter.audit(rows)
    by_code = {}
    for w in a.warnings:
        by_code.setdefault(w.code, []).append(w)
    (cat,) = [w for w in by_code["spelling_variants"] if w.message.startswith("category")]
    # spaces around a name are dropped when the set is read (session 29): 'term ' is 'term', ' TERM' is 'TERM'
    assert "'term' (6)" in cat.message and "'TERM' (1)" in cat.message and "'term '" not in cat.message
    assert "4 ways" in cat.message and cat.cases == [rows[i]["id"] for i in (5, 7, 8)]
    (src,) = [w for w in by_code["spelling_variants"] if w.message.startswith("source")]
    assert "'deepseek' (4)" in src.message and "'DeepSeek' (1)" in src.message and src.cases == [rows[0]["id"]]
    assert a.by_category.height == 4  # counted as written (scoring splits them too), the warning says why
    assert "spelling_variants" in render.plain(a.to_dict())


def test_cases_without_a_category_are_named_not_counted_as_categories_of_one() -> None:
    import ragmeter

    rows = [{"id": f"q{i}", "question": f"Q{i}?", "category": "term", "expectedEvidence": ["x"]} for i in range(8)]
    rows[6]["category"] = ""
    del rows[7]["category"]
    a = ragmeter.audit(rows)
    (w,) = [w for w in a.warnings if w.code == "uncategorised"]
    assert w.cases == ["q6", "q7"] and "2 case(s) without a category" in w.message
    # a set without ids (numbered by line): its cases without a category are counted under 'uncategorised'
    for row in rows:
        del row["id"]
    a = ragmeter.audit(rows)
    (w,) = [w for w in a.warnings if w.code == "uncategorised"]
    assert w.cases == ["row-6", "row-7"] and "'uncategorised'" in w.message


@pytest.mark.parametrize("spec, message", [
    ("category=multi:15;category=term:30", "section 'category' is given twice"),
    ("category=multi:15,term:30,multi:20", "'multi' is given twice in section 'category'"),
])
def test_a_targets_spec_naming_a_section_or_value_twice_is_refused(spec: str, message: str) -> None:
    import ragmeter

    with pytest.raises(InputError, match=message):
        ragmeter.audit(_golden(), targets=spec)


def test_a_targets_json_file_naming_a_value_twice_is_refused(tmp_path: Path) -> None:
    import ragmeter

    path = tmp_path / "targets.json"
    path.write_text('{"category": {"multi": 15, "term": 30, "multi": 20}}', encoding="utf-8")
    with pytest.raises(InputError) as err:
        ragmeter.audit(_golden(), targets=str(path))
    assert str(err.value) == f"{path}: 'multi' is given twice in section 'category'"


def test_a_targets_spec_below_the_set_never_plans_a_smaller_set() -> None:
    """A spec for one new source (or a value lowered) grows the set from its size, not from the spec's sum."""
    import ragmeter

    rows = _golden(n_multi=4, n_term=6)  # no case has a source yet
    d = ragmeter.audit(rows, targets="source=c:2").to_dict()
    assert d["target"]["n"] == 12 and d["gap"]["source"] == {"c": 2} and d["gap"]["total"] == 2
    assert d["resolution"]["target"]["n"] == 12
    d = ragmeter.audit(rows, targets="category=term:3").to_dict()  # fewer than it has: nothing to write
    assert d["target"]["n"] == 10 and d["gap"]["total"] == 0


# ------------------------------------------------------------------------------------------- import: n of N


def test_the_judges_rate_says_how_many_cases_of_the_folder_it_covers(tmp_path: Path) -> None:
    import polars as pl

    from ragmeter.review import export_sheet, import_sheet
    from ragmeter.review.render import ppi_line

    folder = write_folder(tmp_path / "run")
    cases = pl.read_parquet(folder / "cases.parquet")
    skipped = pl.col("id").is_in(["ok-00", "ok-01"])  # no answer in the run: not judged
    cases = cases.with_columns(pl.when(skipped).then(None).otherwise(pl.col("correct")).alias("correct"),
                               pl.when(skipped).then(pl.lit("skipped")).otherwise(pl.col("correctness_status"))
                               .alias("correctness_status"))
    cases.write_parquet(folder / "cases.parquet")
    manifest = export_sheet(folder, random_n=4, seed=7)
    section = import_sheet(folder, fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    assert section["ppi"]["n_cases"] == 48 and section["ppi"]["n_unjudged"] == 2
    assert "over 48 of 50 cases (2 not judged" in ppi_line(section)


# ------------------------------------------------------------------------------------------- compare


def test_compare_refuses_one_folder_given_twice_instead_of_dropping_a_judge(tmp_path: Path, monkeypatch) -> None:
    from ragmeter.review.raters import compare_raters

    folder, manifest = _exported(tmp_path)
    sheet = fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest))
    monkeypatch.chdir(tmp_path)
    for twice in (["run", "run"], ["run", "./run"], ["run", str(folder)]):
        with pytest.raises(InputError, match="is given twice"):
            compare_raters(twice, sheet)
    # two folders of the same name elsewhere are two judges, each named by its path
    other = write_folder(tmp_path / "b" / "run", flip="miss-1")
    result = compare_raters(["run", str(other)], sheet)
    assert result["judges"] == ["run", str(other)] and len(result["pairs"]) == 3
    # a folder named "human" is a judge, not the sheet's rater
    human = write_folder(tmp_path / "human", flip="miss-1")
    result = compare_raters(["run", "human"], sheet)
    assert result["raters"] == ["run", str(human), "human"] and len(result["pairs"]) == 3


def test_compare_with_a_half_filled_sheet_says_how_many_of_its_cases_were_reviewed(tmp_path: Path) -> None:
    import subprocess
    import sys

    from ragmeter.review.raters import compare_raters

    folder, manifest = _exported(tmp_path)
    other = write_folder(tmp_path / "second", flip="miss-1")
    sheet = fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest),
                 skip=("wrong-0", "wrong-1", "miss-2"))
    result = compare_raters([folder, other], sheet)
    assert result["n_cases"] == 12 and result["n_in_sheet"] == 15 and result["n_unreviewed"] == 3
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "review", "compare", str(folder), str(other),
                           "--human", str(sheet)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "12 human-reviewed cases (of 15 in the sheet; 3 not (fully) reviewed, left out)" in " ".join(
        proc.stdout.split())


# ------------------------------------------------------------------------------------------- import: rows deleted


def _export_with_key_points(tmp_path: Path):
    """The worked example whose golden set gives miss-1 and wrong-2 two core key points each."""
    import hashlib

    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": i, "question": "?", "keyPoints": ["*first", "*second"]}) + "\n"
                              for i in ("miss-1", "wrong-2")), encoding="utf-8")
    summary = json.loads((folder / "summary.json").read_text())
    summary["inputs"] = {"golden": {"path": str(golden), "sha256": hashlib.sha256(golden.read_bytes()).hexdigest()}}
    (folder / "summary.json").write_text(json.dumps(summary))
    manifest = export_sheet(folder, random_n=4, seed=7)
    assert len(manifest["key_points"]["miss-1"]) == 2
    return folder, manifest


def test_a_key_point_row_deleted_from_the_sheet_leaves_its_case_unreviewed_not_judged_on_the_rest(tmp_path) -> None:
    from ragmeter.review import import_sheet

    folder, manifest = _export_with_key_points(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    for row in rows:
        if row[0] == "miss-1":
            row[4] = "1" if row[1] == "1" else "0"  # the first point covered, the second not: not correct
    kept = [row for row in rows if not (row[0] == "miss-1" and row[1] == "2")]
    section = import_sheet(folder, _write(tmp_path / "deleted.csv", kept))
    assert "miss-1" in section["incomplete"] and section["points_missing_from_sheet"] == {"miss-1": [2]}
    assert section["n"] == 14  # judged on point 1 alone it would have been 'correct', a disagreement made up
    from ragmeter.review.render import text_lines

    assert "1 with key-point rows deleted from it" in " ".join(text_lines(section))
    # the whole sheet: miss-1 is reviewed, and wrong
    full = import_sheet(folder, _write(tmp_path / "full.csv", rows))
    assert full["n"] == 15 and "points_missing_from_sheet" not in full


def test_a_gap_in_a_cases_point_numbers_leaves_it_unreviewed_without_a_manifest(tmp_path: Path) -> None:
    from ragmeter.review import import_sheet

    folder, manifest = _export_with_key_points(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    kept = [row for row in rows if not (row[0] == "wrong-2" and row[1] == "1")]
    (folder / "review" / "manifest.json").unlink()
    section = import_sheet(folder, _write(tmp_path / "elsewhere" / "gap.csv", kept) if
                           (tmp_path / "elsewhere").mkdir() is None else None)
    assert section["points_missing_from_sheet"] == {"wrong-2": [1]} and "wrong-2" in section["incomplete"]


# ------------------------------------------------------------------------------------------- audit: corpus rows


@pytest.mark.parametrize("bad, line, message", [
    ('{"file": "a.md", "chunk_id": "3", "text": ["page 1", "page 2"]}', 3, "'text' must be a string"),
    ('{"file": "a.md", "chunk_id": "3", "text": 2024}', 3, "'text' must be a string"),
    ('{"file": 7, "chunk_id": "3", "text": "x"}', 3, "'file' must be a string"),
    ('{"file": "  ", "chunk_id": "3", "text": "x"}', 3, "missing 'file'"),
])
def test_a_corpus_row_of_the_wrong_type_is_named_not_turned_into_text(tmp_path: Path, bad: str, line: int,
                                                                       message: str) -> None:
    from ragmeter.audit.corpus import load_corpus

    good = ['{"file": "a.md", "chunk_id": "1", "text": "alpha"}', '{"file": "a.md", "chunk_id": "2", "text": "beta"}']
    path = tmp_path / "chunks.jsonl"
    path.write_text("\n".join(good + [bad, good[0]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_corpus(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}"), str(err.value)


def test_a_well_formed_corpus_with_integer_chunk_ids_and_other_fields_is_read(tmp_path: Path) -> None:
    from ragmeter.audit.corpus import load_corpus

    path = tmp_path / "chunks.jsonl"
    path.write_text('{"file": "a.md", "chunk_id": 1, "text": "alpha", "meta": {"page": 1}}\n'
                    '{"fileName": "b.md", "chunkId": 2, "content": "beta", "meta": null}\n', encoding="utf-8")
    frame = load_corpus(path)
    assert frame.to_dicts() == [{"file": "a.md", "chunk_id": "1", "text": "alpha"},
                                {"file": "b.md", "chunk_id": "2", "text": "beta"}]


# ------------------------------------------------------------------------------------------- export: no C


def test_an_export_without_a_random_case_says_the_estimate_will_have_no_label(tmp_path: Path) -> None:
    import polars as pl

    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")
    cases = pl.read_parquet(folder / "cases.parquet").with_columns(pl.lit(None, dtype=pl.Utf8).alias("review_reason"))
    cases.write_parquet(folder / "cases.parquet")  # eval --review-rate 0 (or a small set): nothing sampled
    manifest = export_sheet(folder)
    assert manifest["random"]["n"] == 0
    note = next(n for n in manifest["notes"] if "--random" in n)
    assert "none of the 39 other cases judged correct" in note and "prediction-powered" in note
    assert not [n for n in export_sheet(folder, random_n=4, out_dir=tmp_path / "s2")["notes"] if "--random" in n]


def test_a_by_field_left_empty_as_nan_is_no_value_not_a_value_named_nan() -> None:
    import ragmeter

    rows = _golden()
    for i, row in enumerate(rows):
        row["platform"] = float("nan") if i < 3 else ("web" if i % 2 else "app")
        row["year"] = 2023 if i < 5 else float("nan")
    a = ragmeter.audit(rows, by="platform")
    assert a.by_source["value"].to_list() == ["(none)", "web", "app"] and a.by_source["n"].to_list()[0] == 3
    a = ragmeter.audit(rows, by="year")
    assert dict(zip(a.by_source["value"].to_list(), a.by_source["n"].to_list())) == {"2023": 5, "(none)": 5}


def test_hard_naming_no_category_of_the_set_is_refused_as_a_typo() -> None:
    import ragmeter

    with pytest.raises(InputError, match=r"^hard: no category of the golden set is named 'mutli' \(it has multi, term\)"):
        ragmeter.audit(_golden(), hard=["mutli"])
    a = ragmeter.audit(_golden(), hard=["multi", "boundary"])  # one of them is enough: the other has no case yet
    assert a.hard["n"] == 4 and a.hard["categories"] == ["multi"]


def test_rates_taken_from_a_results_folder_say_how_many_cases_they_rest_on(tmp_path: Path) -> None:
    import polars as pl

    import ragmeter
    from ragmeter.audit import render

    folder = write_folder(tmp_path / "run")
    cases = pl.read_parquet(folder / "cases.parquet")
    cases = cases.with_columns(pl.when(pl.col("id").str.starts_with("ok-")).then(None).otherwise(pl.col("correct"))
                               .alias("correct"))  # the judge scored 11 of the 50 cases
    cases.write_parquet(folder / "cases.parquet")
    d = ragmeter.audit(_golden(), results=folder).to_dict()
    assert d["resolution"]["rates_n"] == {"hit": {"n_scored": 50, "n_total": 50},
                                          "correct": {"n_scored": 11, "n_total": 50}}
    assert "correct 36.4% over 11/50" in " ".join(render.plain(d).split())


def test_a_targets_value_whose_name_holds_a_colon_points_to_a_targets_file(tmp_path: Path) -> None:
    import ragmeter

    rows = _golden()
    for row in rows:
        row["category"] = "faq:" + row["category"]
    with pytest.raises(InputError, match=r"'faq:multi:5'.*goes in a \.toml or \.json file"):
        ragmeter.audit(rows, targets="category=faq:multi:5")
    path = tmp_path / "targets.toml"
    path.write_text('[category]\n"faq:multi" = 5\n', encoding="utf-8")
    assert ragmeter.audit(rows, targets=str(path)).to_dict()["gap"]["category"]["faq:multi"] == 1


def test_a_sheet_of_an_earlier_export_is_not_taken_for_one_with_rows_deleted(tmp_path: Path) -> None:
    """The folder was exported again since (key points split differently): its manifest's points are not the
    sheet's, so no row counts as deleted."""
    from ragmeter.review import import_sheet

    folder, manifest = _export_with_key_points(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    earlier = [row for row in rows if not (row[0] == "miss-1" and row[1] == "2")]
    for row in earlier:
        if row[0] == "miss-1":
            row[2] = "Reference for miss-1."  # the earlier export's one point: the whole reference
    section = import_sheet(folder, _write(tmp_path / "earlier.csv", earlier))
    assert "points_missing_from_sheet" not in section and "miss-1" not in section["incomplete"]
    assert section["n"] == 15


def test_cases_without_a_source_are_one_warning_not_every_source_under_represented() -> None:
    import ragmeter

    rows = _golden(n_multi=20, n_term=30)
    for i, row in enumerate(rows[:10]):
        row["source"] = "a" if i % 2 else "b"  # 5 and 5: balanced among the cases that have a source
    a = ragmeter.audit(rows)
    assert "source_share_low" not in a.codes()
    (w,) = [w for w in a.warnings if w.code == "source_missing"]
    assert "40 of 50 cases have no source" in w.message and len(w.cases) == 40
    rows[0]["source"] = rows[2]["source"] = rows[4]["source"] = rows[6]["source"] = "a"  # a 9, b 1 of 10
    d = {w.code: w.message for w in ragmeter.audit(rows).warnings}
    assert "source b only 10.0% (1/10 with a source)" in d["source_share_low"]


def test_a_corpus_export_in_latin_1_is_named_by_line_not_read_as_broken_text(tmp_path: Path) -> None:
    from ragmeter.audit.corpus import load_corpus

    path = tmp_path / "chunks.jsonl"
    path.write_bytes(b'{"file": "a.md", "chunk_id": "1", "text": "alpha"}\n'
                     b'{"file": "a.md", "chunk_id": "2", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"chunks\.jsonl:2: not valid UTF-8"):
        load_corpus(path)


def test_a_corpus_line_nested_too_deep_is_named_not_a_crash(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "chunks.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text('{"file": "a.md", "chunk_id": "1", "text": "alpha"}\n'
                    f'{{"file": "a.md", "chunk_id": "2", "text": "beta", "meta": {deep}}}\n', encoding="utf-8")
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "t-1", "question": "?", "expectedFileNames": ["a.md"],
                                  "expectedEvidence": ["alpha"]}) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "audit", "--golden", str(golden), "--corpus", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert proc.stderr.strip() == f"ragmeter: error: {path}:2: JSON nested deeper than 64 levels"


def test_importing_a_sheet_nobody_filled_in_writes_nothing_over_a_calibration(tmp_path: Path) -> None:
    """The blank export imported by mistake after the filled sheet: refused, the calibration kept."""
    from ragmeter.review import import_sheet

    folder, manifest = _exported(tmp_path)
    import_sheet(folder, fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with pytest.raises(InputError, match=r"review\.csv: no case of the sheet is reviewed .*nothing written"):
        import_sheet(folder, folder / "review" / "review.csv")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_names_that_look_like_rich_markup_are_shown_as_written_on_a_terminal() -> None:
    import io

    from rich.console import Console

    import ragmeter
    from ragmeter.audit import render

    rows = [{"id": f"x{i}", "question": f"Q{i}?", "category": ["[/]odd", "[bold]multi", "normal"][i % 3],
             "source": ["s[/]1", "[red]s2"][i % 2], "expectedEvidence": ["x"]} for i in range(12)]
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None)
    render.rich(ragmeter.audit(rows).to_dict(), console)
    text = buf.getvalue()
    for name in ("[/]odd", "[bold]multi", "s[/]1", "[red]s2"):
        assert text.count(name) >= 2, (name, text)  # in the distribution and in the category x source table


def test_a_target_below_the_sets_size_is_refused_not_planned(tmp_path: Path) -> None:
    import ragmeter

    with pytest.raises(InputError, match=r"^target=6: the golden set already has 10 cases"):
        ragmeter.audit(_golden(), target=6)
    d = ragmeter.audit(_golden(), target=10).to_dict()  # its own size, in even shares: one more multi case
    assert d["gap"]["category"] == {"multi": 1, "term": 0} and d["target"]["n"] == 10


def test_an_undefined_kappa_names_the_rater_that_gave_one_label(tmp_path: Path) -> None:
    from ragmeter.calibration import agreement_table, cohen_kappa
    from ragmeter.review import import_sheet

    assert "the second" in cohen_kappa([True, False, True], [True, True, True]).reason  # unnamed: by position
    rows = agreement_table({"gpt": {"a": True, "b": False, "c": True}, "human": {"a": True, "b": True, "c": True}})
    assert "(the human)" in rows[0]["kappa"]["reason"] and "second" not in rows[0]["kappa"]["reason"]
    folder, manifest = _exported(tmp_path)
    everything_correct = {i: True for i in manifest["ids"]}
    section = import_sheet(folder, fill(folder / "review" / "review.csv", tmp_path / "f.csv", everything_correct))
    assert section["kappa"]["value"] is None and "one rater (the human) gave every item" in section["kappa"]["reason"]


def test_compare_says_how_many_cases_each_judge_gave_a_verdict_on(tmp_path: Path) -> None:
    import subprocess
    import sys

    import polars as pl

    from ragmeter.review.raters import compare_raters

    first = write_folder(tmp_path / "first")
    second = write_folder(tmp_path / "second", flip="miss-1")
    cases = pl.read_parquet(second / "cases.parquet")
    failed = pl.col("id").is_in(["ok-00", "ok-01", "ok-02"])
    cases.with_columns(pl.when(failed).then(pl.lit("failed")).otherwise(pl.col("correctness_status"))
                       .alias("correctness_status")).write_parquet(second / "cases.parquet")
    result = compare_raters([first, second])
    assert result["n_judged"] == {"first": {"n_judged": 50, "n_total": 50}, "second": {"n_judged": 47, "n_total": 50}}
    assert result["pairs"][0]["n"] == 47
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "review", "compare", str(first), str(second)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "verdicts: first 50 of 50 cases, second 47 of 50" in " ".join(proc.stdout.split())


@pytest.mark.parametrize("field", ["category", "id", "question"])
def test_by_a_field_that_cannot_be_a_second_dimension_is_refused(field: str) -> None:
    import ragmeter

    with pytest.raises(InputError, match=f"^by='{field}': "):
        ragmeter.audit(_golden(), by=field)


def test_a_seed_without_random_says_it_does_not_redraw_the_runs_sample(tmp_path: Path) -> None:
    import polars as pl

    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")
    cases = pl.read_parquet(folder / "cases.parquet")
    sampled = pl.col("id").is_in(["ok-03", "ok-07"])
    cases.with_columns(pl.when(sampled).then(pl.lit("sampled")).otherwise(None).alias("review_reason")).write_parquet(
        folder / "cases.parquet")
    manifest = export_sheet(folder, seed=99)
    assert sorted(i for i, s in manifest["strata"].items() if s == "random") == ["ok-03", "ok-07"]
    assert any("--seed 99 orders the cards" in note and "--random N" in note for note in manifest["notes"])
    assert not any("--seed" in n for n in export_sheet(folder, out_dir=tmp_path / "s2")["notes"])


def test_the_estimate_says_how_many_of_the_random_sample_it_rests_on(tmp_path: Path) -> None:
    from ragmeter.review import import_sheet
    from ragmeter.review.render import ppi_line

    folder, manifest = _exported(tmp_path)
    c_ids = [i for i, s in manifest["strata"].items() if s == "random"]
    section = import_sheet(folder, fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest),
                                        skip=(c_ids[0],)))
    assert section["ppi"]["n_random_labels"] == 3 and section["ppi"]["n_random_in_sheet"] == 4
    assert "resting on 3 random label(s) (of the 4 cases drawn for C)" in " ".join(ppi_line(section).split())
