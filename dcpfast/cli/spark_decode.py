"""``dcpfast spark-decode``: dumps to a Parquet dataset with Spark."""

from __future__ import annotations

import click

from .. import io as dio
from .app import main, scan_options


@main.command("spark-decode")
@click.argument("inputs", nargs=-1)
@click.option("--sample", is_flag=True, help="Decode the dump bundled with dcpfast.")
@click.option("--out", required=True, help="Directory (or URI) of the Parquet dataset to write.")
@click.option("--master", help="Spark master URL (default: an embedded local[*] Spark).")
@click.option("--method", type=click.Choice(["datasource", "arrow", "pandas"]),
              default="datasource", show_default=True,
              help="The dcp data source, or binaryFile with mapInArrow / mapInPandas.")
@click.option("--partition-by", default="vbucket", show_default=True,
              help="Comma-separated columns to partition the dataset by ('' for none).")
@click.option("--columns", help="Comma-separated output columns (default: all).")
@click.option("--values", "with_values", is_flag=True,
              help="Add content (decompressed body) and xattrs columns.")
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset at --out.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@scan_options
def spark_decode(inputs, sample, out, master, method, partition_by, columns, with_values,
                 overwrite, quiet, collections, errors):
    """Decode DCP dumps (files, directories, URIs) into Parquet with Spark."""
    try:
        import pyspark  # noqa: F401

        from .. import spark as dspark
    except ImportError:
        raise click.ClickException("spark-decode needs PySpark: pip install 'dcpfast[spark]'")
    paths = list(inputs) + ([str(dio.SAMPLE)] if sample else [])
    if not paths:
        raise click.UsageError("give one or more INPUTS, or --sample")
    try:
        summary = dspark.decode_to_parquet(
            paths, out, master=master, method=method,
            partition_by=[c.strip() for c in partition_by.split(",") if c.strip()],
            columns=columns, values=with_values, errors=errors, collections=collections,
            mode="overwrite" if overwrite else "errorifexists", progress=not quiet)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e))
    except Exception as e:
        raise click.ClickException(dspark.spark_error(e)) from None
    rate = ""
    if summary["bytes"]:
        rate = (f" from {summary['bytes'] / 1e6:,.2f} MB "
                f"({summary['bytes'] / 1e6 / summary['seconds']:,.2f} MB/s)")
    parts = ", partitioned by " + ", ".join(summary["partitions"]) if summary["partitions"] \
        else ""
    click.echo(f"{summary['frames']:,} frames{rate} in {summary['seconds']:.1f} s "
               f"-> {out}{parts}")
