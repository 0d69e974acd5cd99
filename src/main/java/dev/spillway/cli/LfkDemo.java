package dev.spillway.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The quickstart's loose-foreign-key demo across two embedded databases: {@code main} holds
 * projects, merge requests and packages; {@code ci} holds pipelines and builds. Deleting projects
 * cascades to merge requests (same database) and pipelines (other database), whose deletes cascade
 * on to builds; merge requests whose head pipeline is gone are nullified, and packages of deleted
 * projects are marked for destruction ({@code update_column_to}). Re-running adds new rows.
 */
final class LfkDemo {
  static final String CI = "ci";
  static final int PROJECTS = 6;
  static final int DELETED = 3;

  /** The definitions, in GitLab's format, written to the working directory for the demo. */
  static final String DEFINITIONS =
      """
      # Loose foreign keys of the quickstart demo, in GitLab's format: keyed by child table.
      merge_requests:
        - table: projects
          column: project_id
          on_delete: async_delete
        - table: ci_pipelines
          column: head_pipeline_id
          on_delete: async_nullify
      packages:
        - table: projects
          column: project_id
          on_delete: update_column_to
          target_column: status
          target_value: 4
      ci_pipelines:
        - table: projects
          column: project_id
          on_delete: async_delete
      ci_builds:
        - table: ci_pipelines
          column: pipeline_id
          on_delete: async_delete
      """;

  /** Which database holds each demo table, as {@code tables:} would say. */
  static final Map<String, String> TABLES =
      Map.of(
          "public.projects", "main",
          "public.merge_requests", "main",
          "public.packages", "main",
          "public.merge_request_diffs", "main",
          "public.ci_pipelines", CI,
          "public.ci_builds", CI);

  private final DataSource main;
  private final DataSource ci;

  LfkDemo(DataSource main, DataSource ci) {
    this.main = main;
    this.ci = ci;
  }

  /** Writes the definitions file; returns its path. */
  static Path writeDefinitions(Path workingDir) throws IOException {
    Path file = workingDir.resolve("demo").resolve("loose_foreign_keys.yml");
    Files.createDirectories(file.getParent());
    Files.writeString(file, DEFINITIONS);
    return file;
  }

  void createSchema() throws SQLException {
    exec(
        main,
        "CREATE TABLE IF NOT EXISTS projects"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS merge_requests"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, project_id bigint NOT NULL,"
            + " head_pipeline_id bigint, title text NOT NULL)",
        "CREATE INDEX IF NOT EXISTS merge_requests_project_id ON merge_requests (project_id)",
        "CREATE INDEX IF NOT EXISTS merge_requests_head_pipeline_id"
            + " ON merge_requests (head_pipeline_id)",
        // A real foreign key inside main, for 'lfk generate' to show.
        "CREATE TABLE IF NOT EXISTS merge_request_diffs"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            + " merge_request_id bigint NOT NULL REFERENCES merge_requests ON DELETE CASCADE)",
        "CREATE INDEX IF NOT EXISTS merge_request_diffs_mr ON merge_request_diffs (merge_request_id)",
        "CREATE TABLE IF NOT EXISTS packages"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, project_id bigint NOT NULL,"
            + " status smallint NOT NULL DEFAULT 0)",
        "CREATE INDEX IF NOT EXISTS packages_project_id_status ON packages (project_id, status)");
    exec(
        ci,
        "CREATE TABLE IF NOT EXISTS ci_pipelines"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, project_id bigint NOT NULL)",
        "CREATE INDEX IF NOT EXISTS ci_pipelines_project_id ON ci_pipelines (project_id)",
        "CREATE TABLE IF NOT EXISTS ci_builds"
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, pipeline_id bigint NOT NULL,"
            + " name text NOT NULL)",
        "CREATE INDEX IF NOT EXISTS ci_builds_pipeline_id ON ci_builds (pipeline_id)");
  }

  /** The rows the demo deletes and those it expects to change. */
  record Data(long[] deletedProjects, long[] theirPipelines) {}

  /**
   * Creates projects, each with merge requests, packages, pipelines (in ci) and builds. Each
   * project's merge requests have as head pipeline one of the next project's pipelines, so deleting
   * a project nullifies the head pipeline of the previous project's merge requests.
   */
  Data createData() throws SQLException {
    long[] projects =
        ids(
            main,
            "INSERT INTO projects (name) SELECT 'demo project ' || g"
                + " FROM generate_series(1, "
                + PROJECTS
                + ") g RETURNING id");
    long[] firstPipeline = new long[PROJECTS];
    for (int i = 0; i < PROJECTS; i++) {
      firstPipeline[i] =
          ids(
              ci,
              "INSERT INTO ci_pipelines (project_id) SELECT "
                  + projects[i]
                  + " FROM generate_series(1, 20) RETURNING id")[0];
      exec(
          ci,
          "INSERT INTO ci_builds (pipeline_id, name) SELECT p.id, 'build ' || g"
              + " FROM ci_pipelines p, generate_series(1, 50) g WHERE p.project_id = "
              + projects[i]);
    }
    for (int i = 0; i < PROJECTS; i++) {
      exec(
          main,
          "INSERT INTO merge_requests (project_id, head_pipeline_id, title) SELECT "
              + projects[i]
              + ", "
              + firstPipeline[(i + 1) % PROJECTS]
              + ", 'merge request ' || g FROM generate_series(1, 100) g",
          "INSERT INTO packages (project_id) SELECT "
              + projects[i]
              + " FROM generate_series(1, 10)");
    }
    long[] deleted = new long[DELETED];
    System.arraycopy(projects, PROJECTS - DELETED, deleted, 0, DELETED);
    long[] pipelines = ids(ci, "SELECT id FROM ci_pipelines WHERE project_id = " + any(deleted));
    return new Data(deleted, pipelines);
  }

  void deleteProjects(Data data) throws SQLException {
    exec(main, "DELETE FROM projects WHERE id = " + any(data.deletedProjects()));
  }

  /** What is left to clean up for the deleted projects, by child. */
  Map<String, Long> remaining(Data d) throws SQLException {
    String projects = any(d.deletedProjects());
    String pipelines = any(d.theirPipelines());
    Map<String, Long> left = new LinkedHashMap<>();
    left.put("merge_requests", count(main, "merge_requests WHERE project_id = " + projects));
    left.put("ci_pipelines", count(ci, "ci_pipelines WHERE project_id = " + projects));
    left.put("ci_builds", count(ci, "ci_builds WHERE pipeline_id = " + pipelines));
    // Merge requests of kept projects whose head pipeline belonged to a deleted project.
    left.put(
        "head_pipeline_id",
        count(
            main,
            "merge_requests WHERE head_pipeline_id = "
                + pipelines
                + " AND NOT project_id = "
                + projects));
    left.put("packages", count(main, "packages WHERE status <> 4 AND project_id = " + projects));
    return left;
  }

  /** Prints progress until nothing is left or the deadline passes; true when all is clean. */
  boolean follow(Data deleted, PrintWriter out, Duration deadline)
      throws SQLException, InterruptedException {
    long end = System.nanoTime() + deadline.toNanos();
    long started = System.nanoTime();
    Map<String, Long> last = null;
    while (true) {
      Map<String, Long> left = remaining(deleted);
      boolean clean = left.values().stream().allMatch(n -> n == 0);
      if (!left.equals(last) || clean) {
        out.printf("  %5.1f s  ", (System.nanoTime() - started) / 1e9);
        StringBuilder line = new StringBuilder();
        left.forEach((k, v) -> line.append(String.format("%s %-5d ", k, v)));
        out.println(line.toString().strip());
        out.flush();
        last = left;
      }
      if (clean) {
        return true;
      }
      if (System.nanoTime() > end) {
        return false;
      }
      Thread.sleep(200);
    }
  }

  private static long count(DataSource ds, String fromWhere) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM " + fromWhere)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static void exec(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      for (String sql : statements) {
        s.execute(sql);
      }
    }
  }

  private static String any(long[] ids) {
    StringBuilder b = new StringBuilder("ANY('{");
    for (int i = 0; i < ids.length; i++) {
      b.append(i == 0 ? "" : ",").append(ids[i]);
    }
    return b.append("}'::bigint[])").toString();
  }

  private static long[] ids(DataSource ds, String query) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      java.util.List<Long> ids = new java.util.ArrayList<>();
      while (rs.next()) {
        ids.add(rs.getLong(1));
      }
      return ids.stream().mapToLong(Long::longValue).toArray();
    }
  }
}
