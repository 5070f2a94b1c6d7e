import { defineGrpcSuite } from './kserve-grpc.suite.js';

defineGrpcSuite('node');
