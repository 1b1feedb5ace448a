"""Tests of `trajkit.arrow`: rollouts as Arrow tables and Parquet files."""
