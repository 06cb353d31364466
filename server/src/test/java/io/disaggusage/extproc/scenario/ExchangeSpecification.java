package io.disaggusage.extproc.scenario;

import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Marks a class of the exchange specification: every test in it, and every cell of its matrices, is
 * followed by the {@link ExchangeInvariants} over all the exchanges it ran.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@ExtendWith(ExchangeInvariants.class)
@interface ExchangeSpecification {}
