"""trajkit's Parquet files as other tools read and rewrite them (pandas, polars, DuckDB, HF).

Each tool must see the shapes (an `[N, 2, 3]` observation, not 6 flat values), and a file the
tool wrote again (without trajkit's schema metadata) must read back as the same rollouts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402


def _recording() -> list[trajkit.Rollout]:
    """Two consecutive rollouts of one recording: nested observations, an image, truncations."""
    whole = example_rollout(
        num_steps=8, num_envs=3, nested=True, truncation=True, done_prob=0.2, seed=11
    )
    assert isinstance(whole.obses, dict)
    image = np.random.default_rng(0).integers(0, 256, (9, 3, 6, 5, 2), dtype=np.uint8)
    whole = whole.replace(obses={**whole.obses, "image": image})

    def rows(start: int, stop: int) -> trajkit.Rollout:
        def cut(tree: Any) -> Any:
            return trajkit._core.tree.map_leaves(lambda leaf: leaf[start : stop + 1], tree)

        assert whole.truncated is not None
        assert whole.final_values is not None
        return trajkit.Rollout(
            states=cut(whole.states),
            obses=cut(whole.obses),
            rews=whole.rews[start:stop],
            dones=whole.dones[start : stop + 1],
            infos=None if whole.infos is None else whole.infos[start:stop],
            model_outs={k: v[start : stop + 1] for k, v in whole.model_outs.arrays.items()},
            truncated=whole.truncated[start:stop],
            final_values=whole.final_values[start:stop],
        )

    return [rows(0, 5), rows(5, 8)]


@pytest.fixture
def exported(tmp_path: Path) -> tuple[list[trajkit.Rollout], Path]:
    rollouts = _recording()
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rollouts, path)
    return rollouts, path


def test_pyarrow_and_pandas_see_the_shapes(exported: tuple[list[trajkit.Rollout], Path]) -> None:
    rollouts, path = exported
    table = pq.read_table(path)
    assert isinstance(rollouts[0].obses, dict)
    assert table.num_rows == 5 * 3 + 3 * 3
    assert table.schema.field("obs.image").type == pa.list_(pa.list_(pa.list_(pa.uint8(), 2), 5), 6)
    frame = table.to_pandas()
    cell = np.stack(frame["obs.image"].iloc[0].tolist())
    image = np.stack([np.stack(row) for row in cell])
    np.testing.assert_array_equal(image, rollouts[0].obses["image"][0, 0])


def test_polars_reads_arrays_and_its_rewrite_comes_back(
    exported: tuple[list[trajkit.Rollout], Path], tmp_path: Path
) -> None:
    pl = pytest.importorskip("polars", reason="polars is in trajkit's dev extras")
    rollouts, path = exported
    frame = pl.read_parquet(path)
    assert frame.schema["obs.image"] == pl.Array(pl.UInt8, (6, 5, 2))
    images = frame["obs.image"].to_numpy()
    assert images.shape == (24, 6, 5, 2)
    np.testing.assert_array_equal(
        images[:15].reshape(5, 3, 6, 5, 2), rollouts[0].obses["image"][:5]
    )
    returns = frame.group_by("episode_id").agg(pl.col("reward").sum()).sort("episode_id")
    assert returns.height == len(set(frame["episode_id"].to_list()))
    again = tmp_path / "polars.parquet"
    frame.write_parquet(again)
    assert b"trajkit" not in (pq.read_schema(again).metadata or {})
    assert ta.read_parquet(again) == rollouts


def test_duckdb_reads_nested_arrays_and_its_copy_comes_back(
    exported: tuple[list[trajkit.Rollout], Path], tmp_path: Path
) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is in trajkit's dev extras")
    rollouts, path = exported
    described = duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()
    types = {row[0]: row[1] for row in described}
    assert types["obs.image"] in ("UTINYINT[][][]", "UTINYINT[2][5][6]")
    assert types["reward"] == "FLOAT"
    ((length,),) = duckdb.sql(f"""SELECT len("obs.image"[1]) FROM '{path}' LIMIT 1""").fetchall()
    assert length == 5  # nested: the second dimension, not 60 flat values
    episodes = duckdb.sql(
        f"SELECT episode_id, sum(reward), bool_or(terminated OR truncated) FROM '{path}' "
        "GROUP BY episode_id"
    ).fetchall()
    assert len(episodes) == len({row[0] for row in episodes})
    again = tmp_path / "duckdb.parquet"
    duckdb.sql(f"COPY (SELECT * FROM '{path}') TO '{again}' (FORMAT parquet)")
    assert ta.read_parquet(again) == rollouts


def test_hf_datasets_reads_shapes_and_its_rewrite_comes_back(
    exported: tuple[list[trajkit.Rollout], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    datasets = pytest.importorskip("datasets", reason="datasets is in trajkit's dev extras")
    rollouts, path = exported
    data = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "cache"))
    rows = data.with_format("numpy")[:]
    assert rows["obs.image"].shape == (24, 6, 5, 2)
    assert str(data.features["obs.image"].feature.feature.feature.dtype) == "uint8"
    assert rows["next_obs.image"].shape == (24, 6, 5, 2)
    assert rows["reward"].shape == (24,)
    np.testing.assert_array_equal(
        rows["next_obs.image"][-3:], rollouts[1].obses["image"][-1]
    )  # the last transitions' next observation: the bootstrap row
    again = tmp_path / "hf.parquet"
    data.to_parquet(str(again))
    assert b"trajkit" not in (pq.read_schema(again).metadata or {})
    assert ta.read_parquet(again) == rollouts


def test_a_rewrite_that_dropped_the_layout_column_is_refused_saying_so(
    exported: tuple[list[trajkit.Rollout], Path], tmp_path: Path
) -> None:
    _, path = exported
    table = pq.read_table(path).replace_schema_metadata(None).drop_columns(["trajkit_layout"])
    again = tmp_path / "bare.parquet"
    pq.write_table(table, again)
    with pytest.raises(ValueError, match=r"keep that column when rewriting; it holds the leaves'"):
        ta.read_parquet(again)
