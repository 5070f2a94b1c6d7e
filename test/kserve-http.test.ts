import { defineHttpSuite } from './kserve-http.suite.js';

defineHttpSuite('node');
