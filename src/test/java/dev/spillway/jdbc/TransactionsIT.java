package dev.spillway.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Work in a transaction of its own setting, on the shared embedded PostgreSQL. */
class TransactionsIT {
  private Databases dbs;
  private DataSource ds;

  @BeforeEach
  void setUp() {
    dbs = EmbeddedInfra.get().databases("tx_work");
    ds = dbs.dataSource("tx_work");
    TestSql.exec(ds, "DROP TABLE IF EXISTS tx_rows", "CREATE TABLE tx_rows (id int)");
  }

  @AfterEach
  void tearDown() {
    dbs.close();
  }

  private static void insert(Connection c) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.execute("INSERT INTO tx_rows VALUES (1)");
    }
  }

  @Test
  void should_commit_under_the_setting_and_leave_the_connection_as_it_was() throws Exception {
    try (Connection c = ds.getConnection()) {
      String inside =
          Transactions.under(
              c,
              Transactions.ROW_SECURITY_OFF,
              () -> {
                insert(c);
                return show(c, "row_security");
              });
      assertThat(inside).isEqualTo("off");
      assertThat(show(c, "row_security")).isEqualTo("on");
      assertThat(c.getAutoCommit()).isTrue();
    }
    assertThat(TestSql.count(ds, "SELECT count(*) FROM tx_rows")).isOne();
  }

  @Test
  void should_read_committed_under_cleanups_setting_whatever_the_databases_default()
      throws Exception {
    try (Databases admin = EmbeddedInfra.get().databases("iso_default")) {
      TestSql.exec(
          admin.dataSource("iso_default"),
          "ALTER DATABASE iso_default SET default_transaction_isolation = 'repeatable read'");
    }
    try (Databases other = EmbeddedInfra.get().databases("iso_default");
        Connection c = other.dataSource("iso_default").getConnection()) {
      String inside =
          Transactions.under(
              c,
              Transactions.ROW_SECURITY_OFF_READ_COMMITTED,
              () -> show(c, "transaction_isolation") + ", " + show(c, "row_security"));
      assertThat(inside).isEqualTo("read committed, off");
      assertThat(show(c, "transaction_isolation"))
          .as("the database's default again after it")
          .isEqualTo("repeatable read");
    }
  }

  private static String show(Connection c, String setting) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SHOW " + setting)) {
      rs.next();
      return rs.getString(1);
    }
  }

  @Test
  void should_roll_back_whatever_the_work_throws_an_error_included() throws Exception {
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(
              () ->
                  Transactions.under(
                      c,
                      Transactions.ROW_SECURITY_OFF,
                      () -> {
                        insert(c);
                        throw new StackOverflowError("deep");
                      }))
          .isInstanceOf(StackOverflowError.class);
      assertThat(c.getAutoCommit()).isTrue();
      assertThatThrownBy(
              () ->
                  Transactions.under(
                      c,
                      Transactions.NO_LOCK_TIMEOUT,
                      () -> {
                        insert(c);
                        throw new SQLException("refused", "42501");
                      }))
          .hasMessage("refused");
      assertThat(c.getAutoCommit()).isTrue();
    }
    assertThat(TestSql.count(ds, "SELECT count(*) FROM tx_rows")).isZero();
  }
}
