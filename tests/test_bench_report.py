"""bench.report: the tables of bench/RESULTS.md come from the committed raw results."""
import pathlib

from bench import report

RUN = pathlib.Path(__file__).resolve().parent.parent / "bench" / "results" / "issue12" / \
    "call4_v24_final"


def test_dense_tables_give_one_row_per_shape_and_the_published_geomeans():
    run = report.load(RUN / "dense_broad.json.gz")
    text = report.dense(run)
    assert sum(line.startswith("| ") and "| fit |" in line for line in text.splitlines()) == 140
    assert "holdout (56 shapes): dgemm / DeepGEMM: geomean **1.019**" in text
    assert "fit (140 shapes): dgemm / DeepGEMM: geomean **1.035**" in text
    assert "dgemm / DeepGEMM: geomean **1.030**" in report.dense(report.load(RUN / "dense_ds.json.gz"))


def test_grouped_tables_and_part_filter(capsys):
    assert report.main(["grouped", str(RUN / "grouped_broad.json.gz"), "--part", "holdout"]) == 0
    out = capsys.readouterr().out
    assert "| fit |" not in out and "| holdout |" in out
    assert "masked, holdout (6 shapes): dgemm / DeepGEMM: geomean **0.970**" in out


def test_an_unreadable_file_is_a_clear_error_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_text("{not json")
    assert report.main(["dense", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err
