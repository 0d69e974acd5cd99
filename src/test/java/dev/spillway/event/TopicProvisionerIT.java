package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.spillway.runtime.EmbeddedKafka;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/** Topics on a broker of their own, whose policy refuses topics that are kept for ever. */
class TopicProvisionerIT {
  /** As a managed service capping retention does. */
  public static final class NoEndlessRetention implements CreateTopicPolicy {
    @Override
    public void validate(RequestMetadata request) {
      if ("-1".equals(request.configs().get("retention.ms"))) {
        throw new PolicyViolationException("retention.ms must be at most 7 days");
      }
    }

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void close() {}
  }

  @Test
  void should_create_dead_letter_topics_with_the_brokers_retention_when_it_refuses_endless_one(
      @TempDir Path dir) throws Exception {
    Logger logger = (Logger) LoggerFactory.getLogger(TopicProvisioner.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    logger.addAppender(logged);
    try (EmbeddedKafka kafka =
        EmbeddedKafka.start(
            dir, 0, Map.of("create.topic.policy.class.name", NoEndlessRetention.class.getName()))) {
      String bootstrap = kafka.bootstrapServers();
      List<String> dlqs = List.of("p.buffers.dlq", "p.lfk.dlq");
      TopicProvisioner.ensure(bootstrap, Map.of(), List.of("p.lfk.delayed"), dlqs, 1, (short) 1);

      try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
        assertThat(admin.listTopics().names().get())
            .contains("p.buffers.dlq", "p.lfk.dlq", "p.lfk.delayed");
        Config dlq =
            admin
                .describeConfigs(
                    List.of(new ConfigResource(ConfigResource.Type.TOPIC, "p.buffers.dlq")))
                .all()
                .get()
                .values()
                .iterator()
                .next();
        assertThat(dlq.get("retention.ms").value()).isEqualTo("604800000");
      }
      assertThat(logged.list)
          .filteredOn(e -> e.getLevel() == Level.WARN)
          .singleElement()
          .extracting(ILoggingEvent::getFormattedMessage)
          .asString()
          .startsWith("Kafka refused topics [")
          .contains("p.buffers.dlq", "p.lfk.dlq")
          .contains("they are created with the broker's settings instead, so the records of those")
          .contains("deleted once the broker's retention has passed");
    } finally {
      logger.detachAppender(logged);
    }
  }
}
