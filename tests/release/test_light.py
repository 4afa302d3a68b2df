"""Features without ``datasets`` (``builders.release.light``): the light encoder gives the very table ``datasets``
gives, or declines (``None``) so that ``datasets`` encodes; a ``feature_record`` stands for its features (schema,
writer options, Parquet bytes)."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import ClassLabel, Features, List, Value

from builders.release import writer
from builders.release.light import LightFeatures, encode_light, feature_record, light_plan

NESTED = Features({
    "s": Value("string"), "i": Value("int32"), "f": Value("float32"), "b": Value("bool"), "d": Value("float64"),
    "li": List(Value("int64")), "lf": List(Value("float32")), "ls": List(Value("string")),
    "st": {"a": Value("int32"), "x": Value("string"), "q": List(Value("float32"))},
    "lst": List({"a": Value("int32"), "f": Value("float32"), "n": List(Value("string"))}),
    "ll": List(List(Value("int8"))),
})

#: values of each column, valid or not: the light encoder must give datasets' table or decline
CHOICES = {
    "s": ["a", None, 5, 1.5, True, ""], "i": [1, 2.7, None, "3", True, -1, 2**40], "b": [True, 0, None, 1.0],
    "f": [1.5, 2, None, "2.5", np.float64(0.1), 2**30, float("inf"), float("nan"), 1e300],
    "d": [0.1, 3, None, 2**60],
    "li": [[1, 2], [1.0, 2], [], None, [None, 3], [True, 1], (1, 2), [2.5, 1], [1, 2**70]],
    "lf": [[1.5, 2], [1, 2], [2**25 + 1], [], None, [None, 0.1], [np.float32(0.5)], [2**24, 3], np.array([1.0])],
    "ls": [["a", 1], [1, "a"], [], None, ["x"], [None, "y"], [1.5]],
    "st": [None, {"a": 1, "x": "y", "q": [1.0]}, {"a": 1.5}, {"a": 1, "zz": 2}, {"q": [1, 2]}, {"x": 3}],
    "lst": [None, [], [{"a": 1, "f": 0.5, "n": ["x"]}], [{"a": 1, "f": 0.5, "n": ["x"]}, {"a": 2, "zz": 1}],
            [{"a": 1.0, "f": 1, "n": []}, {"a": 2.5}], [{"a": 1}, {"f": 2}], [None, {"a": 1}], [{"n": [1]}]],
    "ll": [[[1, 2], []], [[]], None, [[1.0]], [[300]], [None, [1]], [[1], [2.0]]],
}


def _datasets_table(rows, features):
    """The table ``datasets`` makes of ``rows`` (``encode_rows`` before the light encoder), or ``None`` when it
    refuses them."""
    from datasets.arrow_writer import OptimizedTypedSequence

    try:
        arrays = [pa.array(OptimizedTypedSequence(features.encode_column([r[k] for r in rows], k), type=features[k],
                                                  col=k)) for k in features]
        return pa.Table.from_arrays(arrays, schema=features.arrow_schema)
    except Exception:  # noqa: BLE001 - datasets refuses these rows
        return None


def _parquet(table: pa.Table) -> bytes:
    """The Parquet bytes of ``table`` (its schema, metadata included, and its values; NaN equal to NaN)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def test_the_light_encoder_gives_datasets_table_or_declines():
    rng = random.Random(7)
    same = declined = 0
    for _ in range(3000):
        name = rng.choice(sorted(CHOICES))
        features = Features({name: NESTED[name]})
        rows = [{name: rng.choice(CHOICES[name])} for _ in range(rng.randint(1, 4))]
        light = encode_light(rows, features, features.arrow_schema)
        if light is None:
            declined += 1
            continue
        expected = _datasets_table(rows, features)
        assert expected is not None, f"datasets refuses {rows}, the light encoder took them"
        assert _parquet(light) == _parquet(expected), rows
        same += 1
    assert same > 1500 and declined > 300  # both paths were exercised


def test_the_release_rows_of_howtostep_encode_alike():
    from loading_scripts.howtostep import FEATURES

    step = {"step_index": 0, "chunk_index": 0, "text": "cut the onion", "start": 1.0, "end": 2.5, "score": 0.5,
            "stage1_start": None, "stage1_end": None, "stage1_score": 0.25, "pathway_scores": [0.1, 0.2, 0.3]}
    prov = {k: None for k in FEATURES["steps"]["provenance"]} | {"labeler": "two_stage", "nu": 0.5, "rounds": 2}
    rows = [{"video_id": f"v{i}", "task_id": "1", "task_name": "t", "category_1": "c", "category_2": "d",
             "duration": 12.0 + i, "num_frames": 12, "num_raw_steps": 3, "steps": [step] * i, "provenance": prov}
            for i in range(5)]
    light = encode_light(rows, FEATURES["steps"], FEATURES["steps"].arrow_schema)
    assert light is not None and light.equals(_datasets_table(rows, FEATURES["steps"]))


def test_other_feature_types_and_foreign_values_go_to_datasets():
    assert light_plan(Features({"label": ClassLabel(names=["a", "b"])}).to_dict()) is None
    assert light_plan(Features({"x": Value("timestamp[s]")}).to_dict()) is None
    feats = Features({"x": List(Value("float32"))})
    assert encode_light([{"x": np.array([1.0, 2.0])}], feats, feats.arrow_schema) is None
    feats = Features({"x": Value("float32")})
    assert encode_light([{"x": np.float32(1.5)}], feats, feats.arrow_schema) is None
    table = writer.encode_rows([{"x": np.float32(1.5)}], feats)  # datasets encodes it
    assert table.column("x").to_pylist() == [1.5]


def test_a_feature_record_stands_for_its_features(tmp_path):
    from datasets.arrow_writer import get_parquet_column_options

    record = feature_record(NESTED)
    assert record is not None
    light = LightFeatures(json.loads(json.dumps(record)))  # as the release cache keeps it
    assert list(light) == list(NESTED) and light.to_dict() == NESTED.to_dict()
    assert light.arrow_schema.equals(NESTED.arrow_schema, check_metadata=True)
    assert light.column_options == get_parquet_column_options(NESTED, NESTED.arrow_schema)
    assert not light.media and not light.decodes and light.full() == NESTED
    rows = [{k: None for k in NESTED} | {"s": f"row {i}", "lf": [0.5] * i} for i in range(30)]
    a = writer.write_split(tmp_path / "a", "c", "train", rows, NESTED)
    b = writer.write_split(tmp_path / "b", "c", "train", rows, light)
    assert a[0].read_bytes() == b[0].read_bytes()
    assert pq.read_table(b[0]).num_rows == 30


def test_a_light_table_has_the_declared_schema_with_its_metadata():
    feats = Features({"id": Value("int64"), "text": Value("string")})
    table = encode_light([{"id": 1, "text": "a"}], feats, feats.arrow_schema)
    assert isinstance(table, pa.Table) and table.schema.metadata == feats.arrow_schema.metadata
