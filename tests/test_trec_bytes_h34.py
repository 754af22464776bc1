"""``ragmeter trec`` / ``ragmeter.trec.evaluate`` on qrels and runs that are not UTF-8 (Latin-1 ids): trec_eval reads
them as bytes (a qid or docno is a C string compared with ``strcmp``), and so must ragmeter. Before, they were
refused: 'FILE:LINE: not valid UTF-8 text'.

Each Latin-1 case is checked against the same files with every non-ASCII byte replaced by an ASCII stand-in above
every ASCII byte the files hold (``{``, ``|``, ``}``, ``~``, in the bytes' order): the stand-ins keep byte equality
and ``strcmp`` order, so trec_eval gives identical numbers, and the ``-q`` output is the stand-ins' output with the
original bytes put back."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest

from ragmeter.errors import NOTES_LOGGER, InputError
from ragmeter.trec import evaluate

#: the ASCII stand-ins, above every ASCII byte of the test files ('z' is 0x7a)
STAND_INS = b"{|}~"

# Query 'caf\xe9' ties four documents: strcmp descending ranks d\xff (unjudged) > d\xe9 (rel) > dz (rel) > de (0).
LATIN1_QRELS = b"caf\xe9 0 d\xe9 1\ncaf\xe9 0 dz 1\ncaf\xe9 0 de 0\nq2 0 \xe0 1\nq2 0 b 0\n"
LATIN1_RUN = (b"caf\xe9 Q0 de 1 0.5 r\xe9\ncaf\xe9 Q0 dz 2 0.5 r\xe9\ncaf\xe9 Q0 d\xff 3 0.5 r\xe9\n"
              b"caf\xe9 Q0 d\xe9 4 0.5 r\xe9\nq2 Q0 b 1 0.9 r\xe9\nq2 Q0 \xe0 2 0.1 r\xe9\n")


def stand_in_map(*texts: bytes) -> Dict[int, int]:
    """Each non-ASCII byte of ``texts`` -> an ASCII stand-in, in the same order (at most 4 distinct bytes)."""
    high = sorted({b for t in texts for b in t if b >= 0x80})
    assert len(high) <= len(STAND_INS) and not any(b in STAND_INS for t in texts for b in t)
    return dict(zip(high, STAND_INS))


def swap(text: bytes, mapping: Dict[int, int]) -> bytes:
    return bytes(mapping.get(b, b) for b in text)


def trec(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "trec", *args], capture_output=True, cwd=cwd,
                          input=stdin)


def write_pair(folder: Path, qrels: bytes, run: bytes) -> Tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "q").write_bytes(qrels)
    (folder / "r").write_bytes(run)
    return folder / "q", folder / "r"


def test_latin1_ids_are_read_as_bytes_and_give_trec_eval_s_numbers_and_output_bytes(tmp_path: Path) -> None:
    mapping = stand_in_map(LATIN1_QRELS, LATIN1_RUN)
    write_pair(tmp_path / "latin1", LATIN1_QRELS, LATIN1_RUN)
    write_pair(tmp_path / "ascii", swap(LATIN1_QRELS, mapping), swap(LATIN1_RUN, mapping))
    got = trec(tmp_path / "latin1", "-q", "-m", "all_trec", "q", "r")
    want = trec(tmp_path / "ascii", "-q", "-m", "all_trec", "q", "r")
    assert want.returncode == 0 and want.stderr == b"", want.stderr
    assert got.returncode == 0, got.stderr
    back = {v: k for k, v in mapping.items()}
    assert got.stdout == swap(want.stdout, back)  # byte for byte, the ids (and the run id) as in the files
    assert b"map                   \tcaf\xe9\t" in got.stdout and b"runid                 \tall\tr\xe9\n" in got.stdout
    # by hand: the tie ranks [unjudged, 1, 1, 0] for caf\xe9 (AP (1/2 + 2/3) / 2, RR 1/2); q2 ranks [0, 1]
    lines = got.stdout.splitlines()
    assert b"map                   \tcaf\xe9\t0.5833" in lines and b"recip_rank            \tcaf\xe9\t0.5000" in lines
    assert b"map                   \tq2\t0.5000" in lines


def test_the_command_says_once_on_stderr_why_it_read_bytes(tmp_path: Path) -> None:
    qrels = b"1 0 d1 1\n1 0 d2 0\n"
    run = b"1 Q0 d1 1 0.5 r\n1 Q0 d\xe92 2 0.4 r\n"
    write_pair(tmp_path, qrels, run)
    proc = trec(tmp_path, "-m", "map", "q", "r")
    assert proc.returncode == 0 and proc.stdout == b"map                   \tall\t1.0000\n", proc.stderr
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("ragmeter: note: "), err
    assert "r is not UTF-8 at line 2" in err and "as bytes" in err and "trec_eval" in err, err


def test_a_utf8_file_and_a_latin1_partner_are_both_read_as_bytes(tmp_path: Path) -> None:
    """The qrels' 'caf\\xc3\\xa9' (UTF-8) is the run's 'caf\\xc3\\xa9' byte for byte, not its Latin-1 'caf\\xe9'
    (trec_eval compares bytes): the Latin-1 document is retrieved first and is not relevant."""
    qrels = "1 0 café 1\n1 0 x 0\n".encode("utf-8")
    qrels.decode("utf-8")  # valid UTF-8
    run = b"1 Q0 caf\xc3\xa9 2 0.5 r\n1 Q0 caf\xe9 1 0.9 r\n1 Q0 x 3 0.1 r\n"
    mapping = stand_in_map(qrels, run)
    write_pair(tmp_path / "mixed", qrels, run)
    write_pair(tmp_path / "ascii", swap(qrels, mapping), swap(run, mapping))
    got = trec(tmp_path / "mixed", "-q", "-m", "recip_rank", "-m", "P.2", "q", "r")
    want = trec(tmp_path / "ascii", "-q", "-m", "recip_rank", "-m", "P.2", "q", "r")
    assert got.returncode == 0 and want.returncode == 0, got.stderr
    assert got.stdout == swap(want.stdout, {v: k for k, v in mapping.items()})
    assert b"recip_rank            \t1\t0.5000\n" in got.stdout  # ranks: caf\xe9 (0.9), caf\xc3\xa9, x
    assert b"r is not UTF-8 at line 2" in got.stderr, got.stderr
    result = evaluate(tmp_path / "mixed" / "q", tmp_path / "mixed" / "r", ["recip_rank"])
    assert result["recip_rank"].to_list() == [0.5]


def test_a_latin1_run_on_stdin_is_read_as_bytes_too(tmp_path: Path) -> None:
    write_pair(tmp_path, LATIN1_QRELS, LATIN1_RUN)
    from_file = trec(tmp_path, "-q", "-m", "all_trec", "q", "r")
    piped = trec(tmp_path, "-q", "-m", "all_trec", "q", "-", stdin=LATIN1_RUN)
    assert piped.returncode == 0 and piped.stdout == from_file.stdout and b"caf\xe9" in piped.stdout
    assert b"q is not UTF-8 at line 1" in piped.stderr, piped.stderr  # the qrels: the first found
    (tmp_path / "q").write_bytes(b"q2 0 b 1\n")  # UTF-8 qrels
    piped = trec(tmp_path, "-m", "num_q", "q", "-", stdin=LATIN1_RUN)
    assert piped.returncode == 0 and b"stdin is not UTF-8 at line 1" in piped.stderr, piped.stderr


def test_python_api_returns_latin1_ids_one_character_per_byte_and_logs_a_note(tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    mapping = stand_in_map(LATIN1_QRELS, LATIN1_RUN)
    q, r = write_pair(tmp_path / "latin1", LATIN1_QRELS, LATIN1_RUN)
    aq, ar = write_pair(tmp_path / "ascii", swap(LATIN1_QRELS, mapping), swap(LATIN1_RUN, mapping))
    measures = ["map", "recip_rank", "ndcg_cut.10", "P.5"]
    with caplog.at_level(logging.INFO, logger=NOTES_LOGGER):
        got = evaluate(q, r, measures)
    want = evaluate(aq, ar, measures)
    assert got["query"].to_list() == ["caf\xe9", "q2"]  # str, one character per byte
    assert [x.encode("latin-1") for x in got["query"]] == [b"caf\xe9", b"q2"]
    assert got.drop("query").equals(want.drop("query"))
    notes = [rec.getMessage() for rec in caplog.records if rec.name == NOTES_LOGGER]
    assert len(notes) == 1 and f"{q} is not UTF-8 at line 1" in notes[0] and "latin-1" in notes[0].lower(), notes
    summary = evaluate(q, r, ["runid", "map"], per_query=False)
    assert summary["runid"].to_list() == ["r\xe9"]


def test_python_api_reads_one_latin1_file_beside_a_table_as_bytes(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A file given with a dict: the file's bytes as Latin-1 characters, which the dict's ids match."""
    q, _ = write_pair(tmp_path, LATIN1_QRELS, LATIN1_RUN)
    run: Dict[str, Dict[str, float]] = {"caf\xe9": {"d\xe9": 0.9, "de": 0.5}, "q2": {"\xe0": 0.3}}
    with caplog.at_level(logging.INFO, logger=NOTES_LOGGER):
        got = evaluate(q, run, ["recip_rank", "num_rel_ret"])
    assert got["query"].to_list() == ["caf\xe9", "q2"] and got["recip_rank"].to_list() == [1.0, 1.0]
    assert got["num_rel_ret"].to_list() == [1, 1]
    assert any(f"{q} is not UTF-8 at line 1" in rec.getMessage() for rec in caplog.records), caplog.records


@pytest.mark.parametrize("which", ["q", "r"])
def test_an_error_in_a_latin1_file_still_names_its_file_and_line(tmp_path: Path, which: str) -> None:
    qrels, run = LATIN1_QRELS, LATIN1_RUN
    if which == "q":
        qrels += b"q3 0 d\xe9\n"
    else:
        run += b"q2 Q0 \xe9\xe9 3 high r\n"
    write_pair(tmp_path, qrels, run)
    proc = trec(tmp_path, "q", "r")
    line = (qrels if which == "q" else run).count(b"\n")
    assert proc.returncode == 2 and proc.stdout == b"" and b"Traceback" not in proc.stderr
    err = proc.stderr.decode()
    assert err.startswith(f"ragmeter: error: {which}:{line}: ") and err.count("\n") == 1, err
    with pytest.raises(InputError, match=f":{line}: "):
        evaluate(tmp_path / "q", tmp_path / "r", "map")


def test_latin1_ids_in_error_messages_are_shown_as_their_bytes(tmp_path: Path) -> None:
    """The file's byte 0xE0 is shown as the byte it is (h35), not as the Latin-1 'à' it was read as."""
    write_pair(tmp_path, LATIN1_QRELS, LATIN1_RUN + b"q2 Q0 \xe0 3 0.2 r\xe9\n")
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2
    assert "r:7: document \\xe0 appears twice in the ranking of query q2 (first at line 6)" in proc.stderr.decode()


@pytest.mark.parametrize("which", ["q", "r"])
def test_a_binary_file_that_is_not_utf8_is_still_refused(tmp_path: Path, which: str) -> None:
    """Bytes with a NUL are no text (trec_eval would read garbage): the refusal is unchanged."""
    blob = b"1 0 d1 1\n\x89PNG\x00\x00\xff\n"
    qrels, run = (blob, LATIN1_RUN) if which == "q" else (LATIN1_QRELS, blob)
    write_pair(tmp_path, qrels, run)
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr == f"ragmeter: error: {which}:2: not valid UTF-8 text\n".encode(), proc.stderr


@pytest.mark.parametrize("which", ["q", "r"])
@pytest.mark.parametrize("blob,said", [
    (b"\x1f\x8b\x08\x00\xe9\xe9", "is gzip-compressed"),
    ("1 0 d\xe9 1\n".encode("utf-16"), "is UTF-16 text"),
    (b"PK\x03\x04\xe9\n", "is a ZIP archive"),
    (b"%PDF-1.4\n\xe9\n", "is a PDF document"),
    (b"PAR1\xe9\n", "is a Parquet file"),
])
def test_the_binary_and_utf16_diagnoses_are_unchanged_beside_a_latin1_partner(tmp_path: Path, which: str,
                                                                               blob: bytes, said: str) -> None:
    qrels, run = (blob, LATIN1_RUN) if which == "q" else (LATIN1_QRELS, blob)
    write_pair(tmp_path, qrels, run)
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stdout == b"" and proc.stderr.count(b"\n") == 1
    assert proc.stderr.decode().startswith(f"ragmeter: error: {which}: {said}"), proc.stderr


def test_utf8_files_print_no_note(tmp_path: Path) -> None:
    text = "é 0 dé 1\n".encode("utf-8"), "é Q0 dé 1 1 r\n".encode("utf-8")
    write_pair(tmp_path, *text)
    proc = trec(tmp_path, "-q", "-m", "map", "q", "r")
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert proc.stdout.decode("utf-8").startswith("map                   \té\t1.0000\n")



# Shift-JIS: '東京' is the bytes 93 8c 8b 9e, read as bytes they are the characters '\x93\x8c\x8b\x9e', never '東京'
SJIS_RUN = "東京 Q0 文書1 1 2 r\nq2 Q0 x1 1 1 r\n".encode("shift_jis")


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_a_query_missing_beside_a_file_read_as_bytes_says_which_file_and_why(tmp_path: Path, which: str) -> None:
    """A Shift-JIS file beside a dict holding the same ids as text: the file's ids are its bytes as Latin-1
    characters, so no query matches. Before, the error said only 'run: query 東京 has judgements in qrels but no
    ranking in the run' (the file holds it, in Shift-JIS), or showed the file's query as invisible control
    characters, and the note saying why was an INFO record nobody sees by default."""
    path = tmp_path / "sjis"
    path.write_bytes(SJIS_RUN if which == "run" else "東京 0 文書1 1\nq2 0 x1 1\n".encode("shift_jis"))
    as_dict = ({"東京": {"文書1": 1}, "q2": {"x1": 1}} if which == "run"
               else {"東京": {"文書1": 2.0}, "q2": {"x1": 1.0}})
    with pytest.raises(InputError) as err:
        evaluate(as_dict, path, "P.1") if which == "run" else evaluate(path, as_dict, "P.1")
    text = str(err.value)
    qrels_named = path if which == "qrels" else "qrels"  # a file is named by its path (h35)
    assert f"has judgements in {qrels_named} but no ranking in the run" in text, text
    assert f"{path} is not UTF-8 at line 1" in text and "one character per byte" in text, text
    assert "utf-8" in text.lower().split("not utf-8", 1)[1], text  # says what to do: convert it to UTF-8


def test_a_missing_query_beside_a_utf8_file_gets_no_bytes_hint(tmp_path: Path) -> None:
    path = tmp_path / "utf8"
    path.write_bytes("東京 Q0 文書1 1 2 r\n".encode())
    with pytest.raises(InputError) as err:
        evaluate({"東京": {"文書1": 1}, "q2": {"x1": 1}}, path, "P.1")
    assert "q2 has judgements" in str(err.value) and "UTF-8" not in str(err.value), str(err.value)


def test_an_ascii_query_missing_beside_a_file_read_as_bytes_gets_no_bytes_hint(tmp_path: Path) -> None:
    """Only a non-ASCII query can be missing because of how the file was read: q3 is missing whatever it is."""
    path = tmp_path / "sjis"
    path.write_bytes(SJIS_RUN)
    with pytest.raises(InputError) as err:
        evaluate({"q2": {"x1": 1}, "q3": {"x1": 1}}, path, "P.1")
    assert "q3 has judgements" in str(err.value) and "UTF-8" not in str(err.value), str(err.value)


# h35: a message quoting a field of files read as bytes shows the bytes (printable ASCII as is, any other byte as
# \xNN, Python's backslashreplace). Before, each byte was shown as its Latin-1 character, which Rust's {:?} wrote
# as '\u{8e}' for 0x80-0x9F: a Shift-JIS '質問' (8e bf 96 e2) read '"\u{8e}¿\u{96}â"', and unquoted ids printed
# invisible C1 control characters.
SJIS_QUERY = "質問".encode("shift_jis")  # 8e bf 96 e2
SJIS_PAIR = ("質問 0 文書 1\nq2 0 d 1\n".encode("shift_jis"), "質問 Q0 文書 1 0.5 r\nq2 Q0 d 1 0.5 r\n".encode("shift_jis"))
C1_CONTROLS = {chr(c) for c in range(0x80, 0xA0)}


@pytest.mark.parametrize("case,qrels,run,said", [
    ("relevance", SJIS_PAIR[0] + "q2 0 e 高\n".encode("shift_jis"), SJIS_PAIR[1],
     'q:3: relevance "\\x8d\\x82" is not an integer'),
    ("score", SJIS_PAIR[0], SJIS_PAIR[1] + "q2 Q0 e 2 質 r\n".encode("shift_jis"),
     'r:3: score "\\x8e\\xbf" is not a number'),
    ("missing", SJIS_PAIR[0], b"q2 Q0 d 1 0.5 r\n",
     "r: query \\x8e\\xbf\\x96\\xe2 has judgements in q but no ranking in the run; pass "),
], ids=["relevance", "score", "missing"])
def test_errors_about_files_read_as_bytes_show_the_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         case: str, qrels: bytes, run: bytes, said: str) -> None:
    write_pair(tmp_path, qrels, run)
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stdout == b"" and b"Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.decode()  # UTF-8, as every message of the command
    assert err.startswith("ragmeter: error: " + said) and err.count("\n") == 1, err
    assert not C1_CONTROLS & set(err) and "\\u{" not in err and err.isascii(), err
    monkeypatch.chdir(tmp_path)  # the files named as the command names them
    with pytest.raises(InputError) as raised:
        evaluate("q", "r", "map")
    assert str(raised.value) == err[len("ragmeter: error: "):].rstrip("\n").replace("pass -c to", "pass complete=True to")


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_a_file_read_as_bytes_beside_a_dict_shows_its_bad_field_as_bytes(tmp_path: Path, which: str) -> None:
    path = tmp_path / which
    if which == "qrels":
        path.write_bytes(SJIS_PAIR[0] + "q2 0 e 高\n".encode("shift_jis"))
        with pytest.raises(InputError) as raised:
            evaluate(path, {"q2": {"d": 1.0}}, "map")
        assert str(raised.value) == f'{path}:3: relevance "\\x8d\\x82" is not an integer'
    else:
        path.write_bytes(SJIS_PAIR[1] + "q2 Q0 e 2 質 r\n".encode("shift_jis"))
        with pytest.raises(InputError) as raised:
            evaluate({"q2": {"d": 1}}, path, "map")
        assert str(raised.value) == f'{path}:3: score "\\x8e\\xbf" is not a number'


def test_errors_about_utf8_files_quote_their_text_as_before(tmp_path: Path) -> None:
    write_pair(tmp_path, "q 0 d é\n".encode("utf-8"), "q Q0 d 1 1 r\n".encode("utf-8"))
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stderr.decode("utf-8") == 'ragmeter: error: q:1: relevance "é" is not an integer\n'
    write_pair(tmp_path, "é 0 d 1\n".encode("utf-8"), "q Q0 d 1 1 r\n".encode("utf-8"))
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and "r: query é has judgements in q" in proc.stderr.decode("utf-8"), proc.stderr
    with pytest.raises(InputError, match=f"query é has judgements in {tmp_path / 'q'}"):
        evaluate(tmp_path / "q", tmp_path / "r", "map")


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_ids_of_a_file_read_as_bytes_beside_a_dict_are_shown_as_bytes(tmp_path: Path, which: str) -> None:
    """Checks made once both inputs are columns (a document judged or ranked twice, a judged query missing) quote
    the file's ids as its bytes too; the dict's ids stay text."""
    path = tmp_path / which
    if which == "qrels":
        first = SJIS_PAIR[0].splitlines(keepends=True)[0]
        path.write_bytes(first + first)
        with pytest.raises(InputError) as raised:
            evaluate(path, {"q2": {"d": 1.0}}, "map", complete=True)
        want = (f"{path}:2: document \\x95\\xb6\\x8f\\x91 is judged twice for query \\x8e\\xbf\\x96\\xe2 "
                "(first at line 1)")
    else:
        first = SJIS_PAIR[1].splitlines(keepends=True)[0]
        path.write_bytes(first + first)
        with pytest.raises(InputError) as raised:  # the dict's ids as the file's were read, to match them
            evaluate({"\x8e\xbf\x96\xe2": {"\x95\xb6\x8f\x91": 1}}, path, "map")
        want = (f"{path}:2: document \\x95\\xb6\\x8f\\x91 appears twice in the ranking of query \\x8e\\xbf\\x96\\xe2 "
                "(first at line 1)")
    assert str(raised.value).startswith(want) and not C1_CONTROLS & set(str(raised.value)), str(raised.value)


def test_a_judged_query_of_a_file_read_as_bytes_missing_beside_a_dict_is_shown_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "sjis"
    path.write_bytes(SJIS_PAIR[0])
    with pytest.raises(InputError) as raised:
        evaluate(path, {"q2": {"d": 1.0}}, "map")
    text = str(raised.value)
    assert text.startswith(f"run: query \\x8e\\xbf\\x96\\xe2 has judgements in {path} but no ranking in the run"), text
    assert f"{path} is not UTF-8 at line 1" in text, text  # still says why and what to do
