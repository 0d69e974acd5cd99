package dev.spillway.runtime;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.filter.Filter;
import ch.qos.logback.core.spi.FilterReply;

/**
 * Drops the warning the embedded broker's controller logs on every start ("Performing controller
 * activation…"), which says nothing is wrong; its other warnings pass. Named in {@code
 * logback.xml}.
 */
public final class ControllerActivationFilter extends Filter<ILoggingEvent> {
  static final String CONTROLLER = "org.apache.kafka.controller.QuorumController";
  static final String ACTIVATION = "Performing controller activation";

  @Override
  public FilterReply decide(ILoggingEvent event) {
    return CONTROLLER.equals(event.getLoggerName())
            && event.getFormattedMessage() != null
            && event.getFormattedMessage().contains(ACTIVATION)
        ? FilterReply.DENY
        : FilterReply.NEUTRAL;
  }
}
