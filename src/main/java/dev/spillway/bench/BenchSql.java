package dev.spillway.bench;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/** Plain statements benchmarks run to set up and check their data. */
final class BenchSql {
  private BenchSql() {}

  static void exec(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      for (String sql : statements) {
        s.execute(sql);
      }
    }
  }

  /** The first column of the first row of a query returning a number. */
  static long single(DataSource ds, String query) throws SQLException {
    return row(ds, query)[0];
  }

  /** Every column of the first row of a query returning numbers. */
  static long[] row(DataSource ds, String query) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      long[] values = new long[rs.getMetaData().getColumnCount()];
      for (int i = 0; i < values.length; i++) {
        values[i] = rs.getLong(i + 1);
      }
      return values;
    }
  }
}
